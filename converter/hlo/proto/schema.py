"""The few XLA protobuf messages this tool reads, as descriptors built at run time.

Field numbers and types follow XLA's public `xla/xla_data.proto` and
`xla/service/hlo.proto` (package `xla`).  Only what is needed is declared:

- `HloProto` and `HloSnapshot` (what `--xla_dump_hlo_as_proto` and
  `--xla_dump_hlo_snapshots` write) with the module as raw bytes: an embedded message and
  a `bytes` field are the same on the wire, and the module itself is handed to jaxlib,
  whose HloModuleProto parser is XLA's own.
- `LiteralProto`, `ShapeProto`, `LayoutProto`: the recorded arguments and result.

A text proto (pbtxt) of a module needs the module's full schema to become binary; the
module messages are declared for that (`HloModuleProto` and what it holds), field
numbers as in hlo.proto; a field this schema lacks is an error naming it, never skipped.
(Left out: profile_info, dot_sparsity and the NamedSharding form of OpSharding.)
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
_SCALAR = {
    "int64": F.TYPE_INT64, "int32": F.TYPE_INT32, "uint32": F.TYPE_UINT32, "uint64": F.TYPE_UINT64,
    "bool": F.TYPE_BOOL, "float": F.TYPE_FLOAT, "double": F.TYPE_DOUBLE, "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
}

# message -> [(field, number, type, repeated)]; a type not in _SCALAR names a message
# (or, in _ENUMS, an enum) of package xla.
_MESSAGES: dict[str, list[tuple[str, int, str, bool]]] = {
    # xla_data.proto
    "TileProto": [("dimensions", 1, "int64", True)],
    "SplitConfigProto": [("dimension", 1, "int64", False), ("split_indices", 2, "int64", True)],
    "LayoutProto": [
        ("minor_to_major", 1, "int64", True), ("dim_level_types", 9, "DimLevelType", True),
        ("dim_unique", 13, "bool", True), ("dim_ordered", 14, "bool", True), ("tiles", 6, "TileProto", True),
        ("tail_padding_alignment_in_elements", 16, "int64", False), ("element_size_in_bits", 7, "int64", False),
        ("memory_space", 8, "int64", False), ("index_primitive_type", 11, "PrimitiveType", False),
        ("pointer_primitive_type", 12, "PrimitiveType", False), ("physical_shape", 10, "ShapeProto", False),
        ("dynamic_shape_metadata_prefix_bytes", 15, "int64", False),
        ("split_configs", 17, "SplitConfigProto", True)],
    "ShapeProto": [
        ("element_type", 2, "PrimitiveType", False), ("dimensions", 3, "int64", True),
        ("is_dynamic_dimension", 6, "bool", True), ("tuple_shapes", 4, "ShapeProto", True),
        ("layout", 5, "LayoutProto", False)],
    "LiteralProto": [
        ("shape", 1, "ShapeProto", False), ("preds", 2, "bool", True),
        ("s1s", 30, "bytes", False), ("s2s", 26, "bytes", False), ("s4s", 21, "bytes", False),
        ("s8s", 15, "bytes", False), ("u1s", 31, "bytes", False), ("u2s", 27, "bytes", False),
        ("u4s", 22, "bytes", False), ("u8s", 3, "bytes", False),
        ("s32s", 4, "int32", True), ("s64s", 5, "int64", True), ("u32s", 6, "uint32", True),
        ("u64s", 7, "uint64", True), ("f32s", 8, "float", True), ("f64s", 9, "double", True),
        ("c64s", 12, "float", True), ("c128s", 18, "double", True),
        ("tuple_literals", 10, "LiteralProto", True),
        ("f16s", 11, "bytes", False), ("bf16s", 13, "bytes", False), ("u16s", 16, "bytes", False),
        ("s16s", 17, "bytes", False), ("f4e2m1fns", 32, "bytes", False), ("f8e3m4s", 29, "bytes", False),
        ("f8e4m3b11fnuzs", 23, "bytes", False), ("f8e4m3fns", 20, "bytes", False),
        ("f8e4m3fnuzs", 25, "bytes", False), ("f8e4m3s", 28, "bytes", False), ("f8e5m2fnuzs", 24, "bytes", False),
        ("f8e5m2s", 19, "bytes", False), ("f8e8m0fnus", 33, "bytes", False),
        ("sparse_indices", 14, "int64", True)],
    "OpMetadata": [
        ("op_type", 1, "string", False), ("op_name", 2, "string", False), ("source_file", 3, "string", False),
        ("source_line", 4, "int32", False), ("source_end_line", 17, "int32", False),
        ("source_column", 18, "int32", False), ("source_end_column", 19, "int32", False),
        ("profile_type", 5, "ProfileType", True), ("size_of_generated_code_in_bytes", 8, "int64", False),
        ("size_of_memory_working_set_in_bytes", 9, "int64", False), ("deduplicated_name", 12, "string", False),
        ("stack_frame_id", 15, "int32", False), ("scheduling_name", 16, "string", False)],
    "ProgramShapeProto": [("parameters", 1, "ShapeProto", True), ("result", 2, "ShapeProto", False),
                          ("parameter_names", 3, "string", True)],
    "PaddingConfigDimension": [("edge_padding_low", 1, "int64", False), ("edge_padding_high", 2, "int64", False),
                               ("interior_padding", 3, "int64", False)],
    "PaddingConfig": [("dimensions", 1, "PaddingConfigDimension", True)],
    "WindowDimension": [
        ("size", 1, "int64", False), ("stride", 2, "int64", False), ("padding_low", 3, "int64", False),
        ("padding_high", 4, "int64", False), ("window_dilation", 5, "int64", False),
        ("base_dilation", 6, "int64", False), ("window_reversal", 7, "bool", False)],
    "Window": [("dimensions", 1, "WindowDimension", True)],
    "GatherDimensionNumbers": [
        ("offset_dims", 1, "int64", True), ("collapsed_slice_dims", 2, "int64", True),
        ("start_index_map", 3, "int64", True), ("index_vector_dim", 4, "int64", False),
        ("operand_batching_dims", 5, "int64", True), ("start_indices_batching_dims", 6, "int64", True)],
    "ScatterDimensionNumbers": [
        ("update_window_dims", 1, "int64", True), ("inserted_window_dims", 2, "int64", True),
        ("scatter_dims_to_operand_dims", 3, "int64", True), ("index_vector_dim", 4, "int64", False),
        ("input_batching_dims", 5, "int64", True), ("scatter_indices_batching_dims", 6, "int64", True)],
    "ConvolutionDimensionNumbers": [
        ("input_batch_dimension", 7, "int64", False), ("input_feature_dimension", 8, "int64", False),
        ("input_spatial_dimensions", 11, "int64", True), ("kernel_input_feature_dimension", 3, "int64", False),
        ("kernel_output_feature_dimension", 4, "int64", False), ("kernel_spatial_dimensions", 6, "int64", True),
        ("output_batch_dimension", 9, "int64", False), ("output_feature_dimension", 10, "int64", False),
        ("output_spatial_dimensions", 12, "int64", True)],
    "DotDimensionNumbers": [
        ("lhs_contracting_dimensions", 1, "int64", True), ("rhs_contracting_dimensions", 2, "int64", True),
        ("lhs_batch_dimensions", 3, "int64", True), ("rhs_batch_dimensions", 4, "int64", True)],
    "RaggedDotDimensionNumbers": [
        ("dot_dimension_numbers", 1, "DotDimensionNumbers", False), ("lhs_ragged_dimensions", 2, "int64", True),
        ("rhs_group_dimensions", 3, "int64", True)],
    "TriangularSolveOptions": [("left_side", 1, "bool", False), ("lower", 2, "bool", False),
                               ("unit_diagonal", 3, "bool", False),
                               ("transpose_a", 4, "TriangularSolveOptions.Transpose", False)],
    "CholeskyOptions": [("lower", 1, "bool", False)],
    "FrontendAttributes": [("map", 1, "map<string,string>", False)],
    "Statistic": [("stat_name", 1, "string", False), ("stat_val", 2, "double", False)],
    "StatisticsViz": [("stat_index_to_visualize", 1, "int64", False), ("statistics", 2, "Statistic", True)],
    "OpSharding": [
        ("type", 1, "OpSharding.Type", False), ("tile_shape", 2, "ShapeProto", False),
        ("tile_assignment_dimensions", 3, "int64", True), ("tile_assignment_devices", 4, "int64", True),
        ("tuple_shardings", 5, "OpSharding", True), ("replicate_on_last_tile_dim", 6, "bool", False),
        ("metadata", 7, "OpMetadata", True), ("last_tile_dims", 8, "OpSharding.Type", True),
        ("iota_reshape_dims", 9, "int64", True), ("iota_transpose_perm", 10, "int32", True),
        ("is_shard_group", 11, "bool", False), ("shard_group_id", 12, "int64", False),
        ("shard_group_type", 13, "OpSharding.ShardGroupType", False)],
    "ReplicaGroup": [("replica_ids", 1, "int64", True)],
    "IotaReplicaGroupListProto": [
        ("num_replica_groups", 1, "int64", False), ("num_devices_per_group", 2, "int64", False),
        ("iota_reshape_dims", 3, "int64", True), ("iota_transpose_perm", 4, "int32", True)],
    "CollectiveDeviceListProto": [("replica_groups", 1, "ReplicaGroup", True),
                                  ("iota_replica_group_list", 2, "IotaReplicaGroupListProto", False)],
    "SourceTarget": [("source", 1, "int64", False), ("target", 2, "int64", False)],
    "ResultAccuracyTolerance": [("atol", 1, "double", False), ("rtol", 2, "double", False),
                                ("ulps", 3, "int64", False)],
    "ResultAccuracy": [("mode", 1, "ResultAccuracy.Mode", False), ("tolerance", 2, "ResultAccuracyTolerance", False)],
    "PrecisionConfig": [("operand_precision", 1, "PrecisionConfig.Precision", True),
                        ("algorithm", 2, "PrecisionConfig.Algorithm", False)],
    "ParameterReplication": [("replicated_at_leaf_buffers", 1, "bool", True)],
    "OutputOperandAliasing": [("output_shape_index", 1, "int64", True), ("operand_index", 2, "int64", False),
                              ("operand_shape_index", 3, "int64", True)],
    "OriginalArrayProto": [("instruction_name", 1, "string", False), ("shape_index", 2, "int64", True)],
    "OriginalValueElementProto": [("shape_index", 1, "int64", True),
                                  ("original_array", 2, "OriginalArrayProto", False)],
    "OriginalValueProto": [("elements", 1, "OriginalValueElementProto", True),
                           ("is_synthetic_call", 2, "bool", False)],
    "ComputationDevice": [("replica_device_ids", 1, "int64", True)],
    "DeviceAssignmentProto": [("replica_count", 1, "int32", False), ("computation_count", 2, "int32", False),
                              ("computation_devices", 3, "ComputationDevice", True)],
    # hlo.proto
    "SliceDimensions": [("start", 1, "int64", False), ("limit", 2, "int64", False), ("stride", 3, "int64", False)],
    "HloInstructionProto": [
        ("name", 1, "string", False), ("opcode", 2, "string", False), ("shape", 3, "ShapeProto", False),
        ("metadata", 7, "OpMetadata", False), ("literal", 8, "LiteralProto", False),
        ("parameter_number", 9, "int64", False), ("fusion_kind", 11, "string", False),
        ("tuple_index", 13, "int64", False), ("dimensions", 14, "int64", True), ("window", 15, "Window", False),
        ("convolution_dimension_numbers", 16, "ConvolutionDimensionNumbers", False),
        ("feature_group_count", 50, "int64", False), ("batch_group_count", 58, "int64", False),
        ("slice_dimensions", 17, "SliceDimensions", True), ("exponent_bits", 18, "int32", False),
        ("mantissa_bits", 19, "int32", False), ("dynamic_slice_sizes", 20, "int64", True),
        ("padding_config", 21, "PaddingConfig", False), ("outfeed_config", 22, "bytes", False),
        ("distribution", 23, "RandomDistribution", False), ("epsilon", 24, "float", False),
        ("feature_index", 25, "int64", False), ("channel_id", 26, "int64", False),
        ("infeed_config", 27, "bytes", False), ("custom_call_target", 28, "string", False),
        ("outfeed_shape", 29, "ShapeProto", False), ("dot_dimension_numbers", 30, "DotDimensionNumbers", False),
        ("ragged_dot_dimension_numbers", 90, "RaggedDotDimensionNumbers", False),
        ("fft_type", 31, "FftType", False), ("fft_length", 32, "int64", True),
        ("comparison_direction", 63, "string", False),
        ("gather_dimension_numbers", 33, "GatherDimensionNumbers", False), ("gather_slice_sizes", 34, "int64", True),
        ("id", 35, "int64", False), ("operand_ids", 36, "int64", True), ("control_predecessor_ids", 37, "int64", True),
        ("called_computation_ids", 38, "int64", True), ("sharding", 40, "OpSharding", False),
        ("backend_config", 43, "bytes", False), ("replica_groups", 49, "ReplicaGroup", True),
        ("all_reduce_id", 45, "int64", False), ("use_global_device_ids", 71, "bool", False),
        ("is_host_transfer", 47, "bool", False), ("is_stable", 60, "bool", False),
        ("scatter_dimension_numbers", 48, "ScatterDimensionNumbers", False),
        ("precision_config", 51, "PrecisionConfig", False), ("source_target_pairs", 52, "SourceTarget", True),
        ("domain_entry_sharding", 54, "OpSharding", False), ("domain_exit_sharding", 55, "OpSharding", False),
        ("constrain_layout", 56, "bool", False), ("operand_shapes_with_layout", 57, "ShapeProto", True),
        ("triangular_solve_options", 59, "TriangularSolveOptions", False),
        ("cholesky_options", 62, "CholeskyOptions", False),
        ("parameter_replication", 61, "ParameterReplication", False),
        ("custom_call_has_side_effect", 65, "bool", False),
        ("output_operand_aliasing", 74, "OutputOperandAliasing", True),
        ("custom_call_schedule", 76, "CustomCallSchedule", False), ("delta", 66, "int64", False),
        ("indices_are_sorted", 67, "bool", False), ("frontend_attributes", 68, "FrontendAttributes", False),
        ("unique_indices", 69, "bool", False), ("rng_algorithm", 70, "RandomAlgorithm", False),
        ("comparison_type", 72, "string", False), ("is_cross_program_prefetch", 73, "bool", False),
        ("cross_program_prefetch_index", 80, "int32", False), ("padding_type", 75, "PaddingType", False),
        ("custom_call_api_version", 77, "CustomCallApiVersion", False),
        ("async_execution_thread", 79, "string", False), ("k", 81, "int64", False), ("largest", 85, "bool", False),
        ("statistics_viz", 82, "StatisticsViz", False),
        ("collective_device_list", 87, "CollectiveDeviceListProto", False),
        ("original_value", 88, "OriginalValueProto", False), ("is_composite", 89, "bool", False),
        ("result_accuracy", 91, "ResultAccuracy", False)],
    "HloComputationProto": [
        ("name", 1, "string", False), ("instructions", 2, "HloInstructionProto", True),
        ("program_shape", 4, "ProgramShapeProto", False), ("id", 5, "int64", False),
        ("root_id", 6, "int64", False), ("is_fusion_computation", 7, "bool", False),
        ("execution_thread", 8, "string", False)],
    "InstructionSequence": [("instruction_ids", 1, "int64", True)],
    "HloScheduleProto": [("sequences", 1, "map<int64,InstructionSequence>", False)],
    "AliasEntryProto": [("output_shape_index", 1, "int64", True), ("parameter_number", 2, "int64", False),
                        ("parameter_shape_index", 3, "int64", True), ("kind", 4, "Kind", False)],
    "HloInputOutputAliasProto": [("entries", 1, "AliasEntryProto", True)],
    "BufferDonorEntryProto": [("parameter_number", 1, "int64", False), ("parameter_shape_index", 2, "int64", True)],
    "HloBufferDonorProto": [("entries", 1, "BufferDonorEntryProto", True)],
    "CrossProgramPrefetch": [("parameter", 1, "int64", False), ("index", 2, "int64", True),
                             ("offset", 3, "int64", False)],
    # end_line (5) and end_column (6) are what jaxlib 0.10 writes beyond the fields of
    # the hlo.proto read for this schema.
    "FileLocation": [("file_name_id", 1, "int32", False), ("function_name_id", 2, "int32", False),
                     ("line", 3, "int32", False), ("column", 4, "int32", False),
                     ("end_line", 5, "int32", False), ("end_column", 6, "int32", False)],
    "StackFrame": [("file_location_id", 1, "int32", False), ("parent_frame_id", 2, "int32", False)],
    "StackFrameIndexProto": [("file_names", 1, "string", True), ("function_names", 2, "string", True),
                             ("file_locations", 3, "FileLocation", True), ("stack_frames", 4, "StackFrame", True)],
    "HloModuleProto": [
        ("name", 1, "string", False), ("entry_computation_name", 2, "string", False),
        ("entry_computation_id", 6, "int64", False), ("computations", 3, "HloComputationProto", True),
        ("host_program_shape", 4, "ProgramShapeProto", False), ("id", 5, "int64", False),
        ("schedule", 7, "HloScheduleProto", False), ("input_output_alias", 8, "HloInputOutputAliasProto", False),
        ("buffer_donor", 18, "HloBufferDonorProto", False),
        ("cross_program_prefetches", 10, "CrossProgramPrefetch", True), ("is_dynamic", 11, "bool", False),
        ("spmd_output_sharding", 12, "OpSharding", False), ("spmd_parameters_shardings", 14, "OpSharding", True),
        ("use_auto_spmd_partitioning", 16, "bool", False), ("device_assignment", 15, "DeviceAssignmentProto", False),
        ("stack_frame_index", 17, "StackFrameIndexProto", False),
        ("frontend_attributes", 19, "FrontendAttributes", False)],
    # hlo.proto, with the module kept as bytes (see the module docstring)
    "HloProto": [("hlo_module", 1, "bytes", False), ("buffer_assignment", 3, "bytes", False)],
    # The same messages with the module as a message, for text protos (the type names
    # are this tool's; text and wire formats know fields by name and number only).
    "HloProtoText": [("hlo_module", 1, "HloModuleProto", False), ("buffer_assignment", 3, "bytes", False)],
    "HloSnapshotText": [
        ("hlo", 1, "HloProtoText", False), ("arguments", 2, "LiteralProto", True),
        ("result", 3, "LiteralProto", False), ("execution_platform", 4, "string", False)],
    "HloSnapshot": [
        ("hlo", 1, "HloProto", False), ("arguments", 2, "LiteralProto", True),
        ("result", 3, "LiteralProto", False), ("execution_platform", 4, "string", False)],
}

_ENUMS = {
    "PrimitiveType": {
        "PRIMITIVE_TYPE_INVALID": 0, "PRED": 1, "S1": 30, "S2": 26, "S4": 21, "S8": 2, "S16": 3, "S32": 4,
        "S64": 5, "U1": 31, "U2": 27, "U4": 22, "U8": 6, "U16": 7, "U32": 8, "U64": 9, "F16": 10, "F32": 11,
        "BF16": 16, "F64": 12, "F8E5M2": 19, "F8E4M3": 28, "F8E4M3FN": 20, "F8E4M3B11FNUZ": 23, "F8E3M4": 29,
        "F8E5M2FNUZ": 24, "F8E4M3FNUZ": 25, "F4E2M1FN": 32, "F8E8M0FNU": 33, "C64": 15, "C128": 18,
        "TUPLE": 13, "OPAQUE_TYPE": 14, "TOKEN": 17, "BUFFER": 34,
    },
    "DimLevelType": {"DIM_DENSE": 0, "DIM_COMPRESSED": 1, "DIM_SINGLETON": 2, "DIM_LOOSE_COMPRESSED": 3},
    "ProfileType": {"INVALID": 0, "WINDOW": 1, "FLAG": 2, "INTEGER": 3},
    "RandomDistribution": {"RNG_INVALID": 0, "RNG_UNIFORM": 1, "RNG_NORMAL": 2},
    "RandomAlgorithm": {"RNG_DEFAULT": 0, "RNG_THREE_FRY": 1, "RNG_PHILOX": 2},
    "FftType": {"FFT": 0, "IFFT": 1, "RFFT": 2, "IRFFT": 3},
    "PaddingType": {"PADDING_INVALID": 0, "PADDING_VALID": 1, "PADDING_SAME": 2},
    "CustomCallSchedule": {"SCHEDULE_NONE": 0, "SCHEDULE_LATEST": 1, "SCHEDULE_EARLIEST": 2},
    "CustomCallApiVersion": {"API_VERSION_UNSPECIFIED": 0, "API_VERSION_ORIGINAL": 1,
                             "API_VERSION_STATUS_RETURNING": 2, "API_VERSION_STATUS_RETURNING_UNIFIED": 3,
                             "API_VERSION_TYPED_FFI": 4},
    "Kind": {"UNDEFINED_ALIAS": 0, "MAY_ALIAS": 1, "MUST_ALIAS": 2},
}

# Enums declared inside a message (their value names repeat across enums: DEFAULT, TUPLE).
_NESTED_ENUMS = {
    "OpSharding": {
        "Type": {"REPLICATED": 0, "MAXIMAL": 1, "TUPLE": 2, "OTHER": 3, "MANUAL": 4, "UNKNOWN": 5, "UNREDUCED": 6},
        "ShardGroupType": {"AS": 0, "LIKE": 1},
    },
    "TriangularSolveOptions": {"Transpose": {"TRANSPOSE_INVALID": 0, "NO_TRANSPOSE": 1, "TRANSPOSE": 2, "ADJOINT": 3}},
    "ResultAccuracy": {"Mode": {"DEFAULT": 0, "HIGHEST": 1}},
    "PrecisionConfig": {
        "Precision": {"DEFAULT": 0, "HIGH": 1, "HIGHEST": 2},
        "Algorithm": {"ALG_UNSET": 0, "ALG_DOT_ANY_F8_ANY_F8_F32": 1, "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM": 2,
                      "ALG_DOT_F16_F16_F16": 3, "ALG_DOT_F16_F16_F32": 4, "ALG_DOT_BF16_BF16_BF16": 5,
                      "ALG_DOT_BF16_BF16_F32": 6, "ALG_DOT_BF16_BF16_F32_X3": 7, "ALG_DOT_BF16_BF16_F32_X6": 8,
                      "ALG_DOT_TF32_TF32_F32": 9, "ALG_DOT_TF32_TF32_F32_X3": 10, "ALG_DOT_F32_F32_F32": 11,
                      "ALG_DOT_F64_F64_F64": 12, "ALG_DOT_BF16_BF16_F32_X9": 13},
    },
}


@lru_cache(maxsize=None)
def _pool() -> descriptor_pool.DescriptorPool:
    fd = descriptor_pb2.FileDescriptorProto(name="hlo_roundtrip_xla_subset.proto", package="xla", syntax="proto3")
    for name, values in _ENUMS.items():
        enum = fd.enum_type.add(name=name)
        for value_name, number in values.items():
            enum.value.add(name=value_name, number=number)
    enums = set(_ENUMS) | {f"{m}.{e}" for m, nested in _NESTED_ENUMS.items() for e in nested}
    for name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=name)
        for enum_name, values in _NESTED_ENUMS.get(name, {}).items():
            enum = msg.enum_type.add(name=enum_name)
            for value_name, number in values.items():
                enum.value.add(name=value_name, number=number)
        for field_name, number, kind, repeated in fields:
            f = msg.field.add(name=field_name, number=number,
                              label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if kind.startswith("map<"):
                # A map is a repeated nested entry message {key = 1, value = 2}.
                key_type, value_type = kind[4:-1].split(",")
                entry = msg.nested_type.add(name=_camel(field_name) + "Entry")
                entry.options.map_entry = True
                for entry_field, entry_number, entry_kind in (("key", 1, key_type), ("value", 2, value_type)):
                    _set_type(entry.field.add(name=entry_field, number=entry_number, label=F.LABEL_OPTIONAL),
                              entry_kind, enums)
                f.label = F.LABEL_REPEATED
                f.type = F.TYPE_MESSAGE
                f.type_name = f".xla.{name}.{entry.name}"
            else:
                _set_type(f, kind, enums)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return pool


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _set_type(f, kind: str, enums: set[str]) -> None:
    if kind in _SCALAR:
        f.type = _SCALAR[kind]
    elif kind in enums:
        f.type = F.TYPE_ENUM
        f.type_name = f".xla.{kind}"
    else:
        f.type = F.TYPE_MESSAGE
        f.type_name = f".xla.{kind}"


def message_class(name: str):
    """The generated class of message `xla.<name>`."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"xla.{name}"))


PRIMITIVE_TYPE_NAMES = {number: name for name, number in _ENUMS["PrimitiveType"].items()}
