class ModelPatcher:
    def __init__(self, model, load_device="cpu", offload_device="cpu"):
        self.model = model
        self.patches = {}
        self.load_device = load_device
        self.offload_device = offload_device
