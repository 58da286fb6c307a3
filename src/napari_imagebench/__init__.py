"""napari-imagebench: the napari plugin, a thin Qt shell over the headless ``imagebench`` core."""

__version__ = "0.1.0"
