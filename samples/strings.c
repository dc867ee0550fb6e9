// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * strings - the string kfuncs of Linux 6.18 (bpf_strcmp, bpf_strcasecmp,
 * bpf_strchr, bpf_strchrnul, bpf_strnchr, bpf_strrchr, bpf_strlen,
 * bpf_strnlen, bpf_strspn, bpf_strcspn, bpf_strstr, bpf_strnstr) on strings
 * anywhere: their arguments are __ign, so any pointer or number goes.
 *
 * xdp_str reads cfg[0]: the kfunc (op), where each string is (STR_MAP: the
 * text map's value from byte off on; STR_STACK: 64 bytes of it copied to the
 * stack; STR_PKT: the packet from byte off on; STR_RAW: the number raw taken
 * as an address) and arg, the character, count or length argument. out[0]
 * gets the kfunc's return; the verdict is XDP_PASS.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

extern int bpf_strcmp(const char *s1__ign, const char *s2__ign) __ksym;
extern int bpf_strcasecmp(const char *s1__ign, const char *s2__ign) __ksym;
extern int bpf_strchr(const char *s__ign, char c) __ksym;
extern int bpf_strchrnul(const char *s__ign, char c) __ksym;
extern int bpf_strnchr(const char *s__ign, __u64 count, char c) __ksym;
extern int bpf_strrchr(const char *s__ign, int c) __ksym;
extern int bpf_strlen(const char *s__ign) __ksym;
extern int bpf_strnlen(const char *s__ign, __u64 count) __ksym;
extern int bpf_strspn(const char *s__ign, const char *accept__ign) __ksym;
extern int bpf_strcspn(const char *s__ign, const char *reject__ign) __ksym;
extern int bpf_strstr(const char *s1__ign, const char *s2__ign) __ksym;
extern int bpf_strnstr(const char *s1__ign, const char *s2__ign, __u64 len) __ksym;

enum { STRCMP, STRCASECMP, STRCHR, STRCHRNUL, STRNCHR, STRRCHR, STRLEN, STRNLEN,
       STRSPN, STRCSPN, STRSTR, STRNSTR };
enum { STR_MAP, STR_STACK, STR_PKT, STR_RAW };
#define TEXT 70000
#define COPY 64

struct cfg {
	__u32 op;
	__u32 where[2];
	__u32 off[2];
	__u32 pad;
	__u64 arg;
	__u64 raw[2];
};

struct text {
	char b[TEXT];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct text);
} text SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} out SEC(".maps");

static __always_inline const char *where(struct cfg *c, int k, struct text *t, char *buf,
					 struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	__u32 off = c->off[k];

	switch (c->where[k]) {
	case STR_MAP:
		return off < TEXT ? &t->b[off] : NULL;
	case STR_STACK:
		if (off < TEXT - COPY)
			__builtin_memcpy(buf, &t->b[off], COPY);
		return buf;
	case STR_PKT:
		return off < 1500 ? data + off : NULL;
	default:
		return (const char *)c->raw[k];
	}
}

SEC("xdp")
int xdp_str(struct xdp_md *ctx)
{
	char b1[COPY] = {}, b2[COPY] = {};
	__u32 zero = 0;
	struct cfg *c = bpf_map_lookup_elem(&cfg, &zero);
	struct text *t = bpf_map_lookup_elem(&text, &zero);
	const char *s1, *s2;
	__s64 r, *o;

	if (!c || !t)
		return XDP_ABORTED;
	s1 = where(c, 0, t, b1, ctx);
	s2 = where(c, 1, t, b2, ctx);
	switch (c->op) {
	case STRCMP: r = bpf_strcmp(s1, s2); break;
	case STRCASECMP: r = bpf_strcasecmp(s1, s2); break;
	case STRCHR: r = bpf_strchr(s1, c->arg); break;
	case STRCHRNUL: r = bpf_strchrnul(s1, c->arg); break;
	case STRNCHR: r = bpf_strnchr(s1, c->arg >> 8, c->arg); break;
	case STRRCHR: r = bpf_strrchr(s1, c->arg); break;
	case STRLEN: r = bpf_strlen(s1); break;
	case STRNLEN: r = bpf_strnlen(s1, c->arg); break;
	case STRSPN: r = bpf_strspn(s1, s2); break;
	case STRCSPN: r = bpf_strcspn(s1, s2); break;
	case STRSTR: r = bpf_strstr(s1, s2); break;
	case STRNSTR: r = bpf_strnstr(s1, s2, c->arg); break;
	default: r = -1000;
	}
	o = bpf_map_lookup_elem(&out, &zero);
	if (o)
		*o = r;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
