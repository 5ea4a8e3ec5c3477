#!/usr/bin/env python3
"""Writes the Perfetto field numbers and enum values gtrace's .pftrace code uses, from the
FileDescriptorSet protoc makes of userspace/format/pftrace.proto (the build runs this: the
numbers are never written by hand, and the tests decode traces with the same .proto).

Each message becomes a struct of constants: TracePacket.timestamp_clock_id is
pftrace::TracePacket::kTimestampClockId; a nested message a nested struct
(ClockSnapshot::Clock::kTimestamp); an enum's values keep their names
(pftrace::TrackEvent::TYPE_SLICE_BEGIN, pftrace::BuiltinClock::BUILTIN_CLOCK_MONOTONIC).

Usage: gen_pftrace_fields.py DESCRIPTOR_SET OUTPUT_HEADER
"""
import sys

from google.protobuf import descriptor_pb2


def camel(name):
    return "k" + "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def enum_lines(enum, indent):
    out = [f"{indent}struct {enum.name} {{"]
    for v in enum.value:
        out.append(f"{indent}    static constexpr uint32_t {v.name} = {v.number};")
    out.append(f"{indent}}};")
    return out


def message_lines(msg, indent):
    out = [f"{indent}struct {msg.name} {{"]
    inner = indent + "    "
    for f in msg.field:
        out.append(f"{inner}static constexpr uint32_t {camel(f.name)} = {f.number};")
    for e in msg.enum_type:
        for v in e.value:  # proto2 enum values live in the enclosing message's scope
            out.append(f"{inner}static constexpr uint32_t {v.name} = {v.number};")
    for nested in msg.nested_type:
        out += message_lines(nested, inner)
    out.append(f"{indent}}};")
    return out


def main():
    descriptors = descriptor_pb2.FileDescriptorSet()
    with open(sys.argv[1], "rb") as f:
        descriptors.ParseFromString(f.read())
    lines = ["// Generated at build time from userspace/format/pftrace.proto (protoc, then",
             "// scripts/gen_pftrace_fields.py): Perfetto's field numbers and enum values. Do not edit.",
             "#pragma once", "#include <cstdint>", "", "namespace gtrace::pftrace {", ""]
    for file in descriptors.file:
        for msg in file.message_type:
            lines += message_lines(msg, "")
            lines.append("")
        for enum in file.enum_type:
            lines += enum_lines(enum, "")
            lines.append("")
    lines.append("} // namespace gtrace::pftrace")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
