"""Stand-in for transformers, which Debian 12 does not ship: the
CLIPTokenizer that ComfyUI's SD1 text encoder (comfy/sd1_clip.py) loads
from its own comfy/sd1_tokenizer folder, for real.

ComfyUI's comfy/sd.py also imports, at start-up, the modules of other text
encoders, which import these tokenizer classes by name; they are importable
here and say clearly, when used, that this stand-in lacks them."""
from .clip import CLIPTokenizer

__version__ = "0+ramcache.standin"


def _absent(name):
    """A class named @name that cannot be built: ComfyUI imports it at
    start-up but only a model family these tests do not load uses it."""
    def refuse(*args, **kwargs):
        raise NotImplementedError(
            f"transformers.{name} is not provided by the ramcache modelkit stand-in "
            "(only CLIPTokenizer, for SD1 models, is)")
    return type(name, (), {"__init__": refuse, "from_pretrained": classmethod(refuse),
                           "__doc__": f"Absent from this stand-in: {name}."})


BertTokenizer = _absent("BertTokenizer")
ByT5Tokenizer = _absent("ByT5Tokenizer")
LlamaTokenizerFast = _absent("LlamaTokenizerFast")
Qwen2Tokenizer = _absent("Qwen2Tokenizer")
T5TokenizerFast = _absent("T5TokenizerFast")

__all__ = ["BertTokenizer", "ByT5Tokenizer", "CLIPTokenizer", "LlamaTokenizerFast",
           "Qwen2Tokenizer", "T5TokenizerFast"]
