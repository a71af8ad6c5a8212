"""Sample profile shipped with the package: a real H100 ResNet-50 training step (see README.md here)."""
