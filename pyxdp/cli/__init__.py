"""The ``pyxdp`` command."""
