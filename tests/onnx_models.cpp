// Placeholder: ONNX model builders for the tests.
