"""comfy.sd: the CLIP and VAE objects a checkpoint loader returns, each
holding its model in a ModelPatcher (.patcher)."""
from .model_patcher import ModelPatcher


class CLIP:
    def __init__(self, target=None, embedding_directory=None, no_init=False,
                 tokenizer_data={}, parameters=0, model_options={}):
        self.patcher = ModelPatcher(target)


class VAE:
    def __init__(self, sd=None, device=None, config=None, dtype=None, metadata=None):
        self.patcher = ModelPatcher(sd)
