"""calib: make classifier scores trustworthy as probabilities."""

__version__ = "0.1.0"
