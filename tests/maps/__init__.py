"""Tests of pyxdp.maps (user-space BPF maps) and their differential test against the kernel."""
