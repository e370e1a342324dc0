"""comfy.model_base: a diffusion model takes its weights from a state
dict in load_model_weights."""


class BaseModel:
    def __init__(self, weights=None):
        self.weights = weights

    def load_model_weights(self, sd, unet_prefix=""):
        self.weights = sd
        return self
