"""Pure readers of the input formats (Kineto JSON, Nsight Systems, Nsight Compute): file -> Arrow or Python."""
