"""einops.layers: the pattern operations as framework layers."""
