"""The XDP datapath: buffers and frames, packets, captures, devices and redirect."""
