#!/usr/bin/env python3
"""(Re)generate tests/e2e/model_repository from the table below.

Every model's ``1/model.py`` is a relative symlink to ``model_src/model.py``;
the config parameter ``kind`` selects the behaviour.  Run after editing:
    .venv/bin/python tests/e2e/model_src/generate.py
"""

import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(os.path.dirname(HERE), "model_repository")

IDENTITY_TYPES = [
    "BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
    "FP16", "BF16", "FP32", "FP64", "BYTES",
]

CPU1 = "instance_group [ { kind: KIND_CPU count: 1 } ]\n"


def kind(k, **extra):
    items = [("kind", k)] + sorted(extra.items())
    body = ",\n".join(
        '  { key: "%s" value: { string_value: "%s" } }' % (key, value) for key, value in items
    )
    return "parameters [\n%s\n]\n" % body


def tensor(name, dtype, dims, label=None, optional=False):
    triton_type = "TYPE_STRING" if dtype == "BYTES" else "TYPE_" + dtype
    extra = ' label_filename: "%s"' % label if label else ""
    extra += " optional: true" if optional else ""
    return '  { name: "%s" data_type: %s dims: [ %s ]%s }' % (
        name, triton_type, ", ".join(str(d) for d in dims), extra)


def io(section, tensors):
    return "%s [\n%s\n]\n" % (section, ",\n".join(tensors))


def config(name, max_batch_size, inputs, outputs, params, extra=""):
    return (
        'name: "%s"\nbackend: "python"\nmax_batch_size: %d\n' % (name, max_batch_size)
        + io("input", inputs) + io("output", outputs) + extra + CPU1 + params
    )


def models():
    out = {}
    add_sub_in = [tensor("INPUT0", "FP32", [-1]), tensor("INPUT1", "FP32", [-1])]
    out["add_sub"] = config(
        "add_sub", 0, add_sub_in,
        [tensor("OUTPUT0", "FP32", [-1]), tensor("OUTPUT1", "FP32", [-1])], kind("add_sub"))
    out["add_sub_label"] = config(
        "add_sub_label", 0, add_sub_in,
        [tensor("OUTPUT0", "FP32", [-1], label="labels.txt"), tensor("OUTPUT1", "FP32", [-1])],
        kind("add_sub"))
    for dtype in IDENTITY_TYPES:
        name = "identity_" + dtype.lower()
        out[name] = config(
            name, 8, [tensor("INPUT0", dtype, [-1])], [tensor("OUTPUT0", dtype, [-1])],
            kind("identity"))
    out["string_single"] = config(
        "string_single", 0, [tensor("INPUT0", "BYTES", [1])], [tensor("OUTPUT0", "BYTES", [1])],
        kind("identity"))
    out["slow_identity"] = config(
        "slow_identity", 8, [tensor("INPUT0", "FP32", [-1])], [tensor("OUTPUT0", "FP32", [-1])],
        kind("slow", default_delay_ms="0"))
    out["repeat_decoupled"] = config(
        "repeat_decoupled", 0, [tensor("INPUT0", "INT32", [1])], [tensor("OUTPUT0", "INT32", [1])],
        kind("repeat"), extra="model_transaction_policy { decoupled: true }\n")
    text_in = [tensor("text_input", "BYTES", [1]), tensor("max_tokens", "INT32", [1], optional=True)]
    text_out = [tensor("text_output", "BYTES", [-1])]
    out["text_generate"] = config("text_generate", 0, text_in, text_out, kind("tokens"))
    out["text_stream"] = config(
        "text_stream", 0, text_in, text_out, kind("tokens"),
        extra="model_transaction_policy { decoupled: true }\n")
    out["sequence_accumulate"] = config(
        "sequence_accumulate", 8, [tensor("INPUT0", "INT32", [1])],
        [tensor("OUTPUT0", "INT32", [1])], kind("accumulate"),
        extra=(
            "sequence_batching {\n"
            "  max_sequence_idle_microseconds: 5000000\n"
            "  control_input [\n"
            '    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },\n'
            '    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },\n'
            '    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }\n'
            "  ]\n"
            "}\n"
        ))
    return out


LABELS = {"add_sub_label": "label_zero\nlabel_one\nlabel_two\nlabel_three\n"}


def main():
    if os.path.isdir(REPO):
        shutil.rmtree(REPO)
    for name, text in sorted(models().items()):
        version_dir = os.path.join(REPO, name, "1")
        os.makedirs(version_dir)
        with open(os.path.join(REPO, name, "config.pbtxt"), "w") as f:
            f.write(text)
        if name in LABELS:
            with open(os.path.join(REPO, name, "labels.txt"), "w") as f:
                f.write(LABELS[name])
        os.symlink(os.path.join("..", "..", "..", "model_src", "model.py"),
                   os.path.join(version_dir, "model.py"))


if __name__ == "__main__":
    main()
