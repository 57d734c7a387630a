/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef BCP_XFER_SRV_H
#define BCP_XFER_SRV_H
#endif
