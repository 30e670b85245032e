"""The ONNX cache's fast-start copies: writing them removes the optimized copy of releases before the instruction
set was in its name (``model.optimized.onnx``), which no session loads any more."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from citeline.model.onnx import mapped_file, model_file, onnx_file_name, optimized_file, write_mapped_copy


def _tiny_export(export_dir: Path) -> Path:
    """A one-MatMul ONNX graph where the export would be (a real one takes a model export)."""
    weights = np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 512
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    exported = export_dir / onnx_file_name("onnx")
    exported.parent.mkdir(parents=True)
    onnx.save_model(model, str(exported))
    return exported


def test_writing_the_copies_removes_the_old_unsuffixed_optimized_copy(tmp_path: Path) -> None:
    export_dir = tmp_path / "all-MiniLM-L6-v2-0123456789abcdef"
    exported = _tiny_export(export_dir)
    old = exported.with_name("model.optimized.onnx")
    old.write_bytes(b"an earlier release's optimized graph")
    old.with_name(old.name + ".data").write_bytes(b"\0" * 1024)
    write_mapped_copy(export_dir, "onnx")
    assert not old.exists() and not old.with_name(old.name + ".data").exists()
    assert mapped_file(exported).exists() and optimized_file(exported).exists()
    assert model_file(export_dir, "onnx") == optimized_file(exported)
    session = onnxruntime.InferenceSession(str(optimized_file(exported)), providers=["CPUExecutionProvider"])
    x = np.ones((1, 64), dtype=np.float32)
    expected = x @ (np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 512)
    assert np.allclose(session.run(None, {"x": x})[0], expected, rtol=1e-5)
    write_mapped_copy(export_dir, "onnx")  # again, nothing to remove: no error
