class ModelPatcher:
    def __init__(self, model, load_device="cpu", offload_device="cpu"):
        self.model = model
        self.patches = {}
        self.load_device = load_device
        self.offload_device = offload_device

    def is_dynamic(self):
        return False

    def model_patches_models(self):
        """The models the patches bring (a ControlNet's...): none here."""
        return []


class ModelPatcherDynamic(ModelPatcher):
    """0.25.0's dynamic-VRAM patcher, as far as its pinned host memory
    goes: dynamic_pins per load device, loaded_ram_size(),
    partially_unload_ram(). Its pins are tensors of real memory here."""

    def __init__(self, model, load_device="cuda:0", offload_device="cpu", pins=()):
        super().__init__(model, load_device, offload_device)
        model.dynamic_pins = {load_device: {"active": False, "current_prompt": False}}
        self.pins = list(pins)

    def is_dynamic(self):
        return True

    def loaded_ram_size(self):
        return sum(t.untyped_storage().nbytes() for t in self.pins)

    def partially_unload_ram(self, ram_to_unload):
        freed = 0
        while self.pins and ram_to_unload > 0:
            n = self.pins.pop().untyped_storage().nbytes()
            freed += n
            ram_to_unload -= n
        return freed
