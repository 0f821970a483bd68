"""Roofline: measured (Nsight Compute) and estimated (FLOP and bytes of operator shapes) against device peaks."""
