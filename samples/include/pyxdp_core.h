/* SPDX-License-Identifier: MIT */
/*
 * pyxdp_core.h - CO-RE (Compile Once - Run Everywhere) for pyxdp's samples.
 *
 * A struct declared with __core is laid out by the loader, not the compiler:
 * every member access through it is recorded as a CO-RE relocation that a
 * loader rewrites with the offset the member has in the target's BTF (the
 * running kernel's, found by name: a "___flavor" suffix is ignored, so
 * struct iphdr___mine relocates against struct iphdr). The macros below ask
 * the loader other questions with clang's builtins: does a field or type
 * exist, how big is it, what value does an enumerator have.
 */
#ifndef PYXDP_CORE_H
#define PYXDP_CORE_H

#define __core __attribute__((preserve_access_index))

/* enum bpf_field_info_kind, enum bpf_type_info_kind, enum bpf_enum_value_kind */
#define PYXDP_FIELD_BYTE_OFFSET 0
#define PYXDP_FIELD_BYTE_SIZE 1
#define PYXDP_FIELD_EXISTS 2
#define PYXDP_FIELD_SIGNED 3
#define PYXDP_FIELD_LSHIFT_U64 4
#define PYXDP_FIELD_RSHIFT_U64 5
#define PYXDP_TYPE_EXISTS 0
#define PYXDP_TYPE_SIZE 1
#define PYXDP_ENUMVAL_EXISTS 0
#define PYXDP_ENUMVAL_VALUE 1

#define core_field_exists(field) __builtin_preserve_field_info(field, PYXDP_FIELD_EXISTS)
#define core_field_size(field) __builtin_preserve_field_info(field, PYXDP_FIELD_BYTE_SIZE)
#define core_field_offset(field) __builtin_preserve_field_info(field, PYXDP_FIELD_BYTE_OFFSET)
#define core_type_exists(type) __builtin_preserve_type_info(*(type *)0, PYXDP_TYPE_EXISTS)
#define core_type_size(type) __builtin_preserve_type_info(*(type *)0, PYXDP_TYPE_SIZE)
#define core_enum_exists(type, value) \
	__builtin_preserve_enum_value(*(type *)value, PYXDP_ENUMVAL_EXISTS)
#define core_enum_value(type, value) \
	__builtin_preserve_enum_value(*(type *)value, PYXDP_ENUMVAL_VALUE)

/* An unsigned bitfield of at most 8 bits that lies in one byte: load the byte
 * the loader says holds it, shift the field to the top, then down. */
#define core_bitfield_u8(s, field) ({                                            \
	__u64 __v = *(__u8 *)((void *)(s) + core_field_offset((s)->field));      \
	__v <<= __builtin_preserve_field_info((s)->field, PYXDP_FIELD_LSHIFT_U64); \
	__v >>= __builtin_preserve_field_info((s)->field, PYXDP_FIELD_RSHIFT_U64); \
	__v;                                                                     \
})

#endif
