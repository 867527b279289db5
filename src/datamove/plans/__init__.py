"""Plans: each operation on concrete shapes, described as data that an engine executes.

``views`` (the output as strided views of the input, with the regions to
zero: the CPU engines' form), ``moves`` (one masked strided move: the GPU
kernels' form) and ``formulas`` (the specs' pad, reshape, transpose, reshape,
crop: the form of the array-API, TensorFlow and ONNX paths). Pure and shared by
every engine; they read the rules, never an array library.
"""
