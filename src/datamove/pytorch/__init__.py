"""PyTorch's own machinery: the custom ops ``torch.ops.datamove.*``, their ONNX translations, memory layouts.

``custom_ops`` (one graph node per call for autograd, ``torch.compile`` and
export; the eager body is given by :mod:`datamove.ops`), ``onnx`` (the four
operations as standard ONNX ops from both exporters) and ``layout`` (the
memory format a result keeps). PyTorch is imported only when a tensor
arrives. The PyTorch modules users build with are :mod:`datamove.nn`, a
front end above the operations.
"""
