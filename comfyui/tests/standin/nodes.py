"""Stand-in of ComfyUI's nodes module: the node registry and the interrupt
entry points execution.py calls."""
import comfy.model_management

NODE_CLASS_MAPPINGS = {}
NODE_DISPLAY_NAME_MAPPINGS = {}


def interrupt_processing(value=True):
    comfy.model_management.interrupt_current_processing(value)


def before_node_execution():
    comfy.model_management.throw_exception_if_processing_interrupted()
