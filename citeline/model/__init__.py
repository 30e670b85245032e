"""The embedding model: token-budgeted chunking, the ``Embedder`` protocol and its torch and ONNX backends."""
