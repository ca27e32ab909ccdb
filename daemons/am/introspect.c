/* inca-am services for generic gRPC tools: grpc.health.v1.Health (Check, Watch) and server
 * reflection (grpc.reflection.v1alpha and v1: list services, files by name or by symbol) from
 * the descriptor set protoc wrote at build time (proto/meson.build). Open to anonymous
 * callers: they reveal the public API, no state. Main loop only; server.c does the I/O. */
#include <stdlib.h>
#include <string.h>

#include "am.h"
#include "grpc_health.pb-c.h"
#include "grpc_reflection.pb-c.h"

/* proto/bin2c.py: FileDescriptorSet of inca_am.proto, grpc_health.proto, grpc_reflection.proto */
extern const unsigned char am_descriptor_set[];
extern const size_t am_descriptor_set_len;

#define MAX_FILES 8
#define MAX_NAMES 96

struct dfile {
	const uint8_t *p;
	size_t n;
	char name[128], pkg[128];
	char top[MAX_NAMES][AM_STR]; /* top-level messages, enums and services */
	size_t ntop;
};

static struct dfile files[MAX_FILES];
static size_t nfiles;
static bool parsed;

static const char *const services[] = { "inca.am.v1.Am", "grpc.health.v1.Health",
					"grpc.reflection.v1alpha.ServerReflection" };

/* Protobuf wire format, just enough to walk a descriptor: returns the bytes used, 0 if bad. */
static size_t varint(const uint8_t *p, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n && i < 10; i++) {
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80))
			return i + 1;
	}
	return 0;
}

/* Next field of p[0..n): its number and, for length-delimited fields, the payload. Returns the
 * bytes the field takes, 0 at the end or on a malformed field. */
static size_t field(const uint8_t *p, size_t n, uint32_t *num, const uint8_t **val, size_t *vlen)
{
	uint64_t tag, v;
	size_t k = varint(p, n, &tag), m;

	if (!k)
		return 0;
	*num = (uint32_t)(tag >> 3);
	*val = NULL;
	*vlen = 0;
	switch (tag & 7) {
	case 0:
		m = varint(p + k, n - k, &v);
		return m ? k + m : 0;
	case 1:
		return n - k >= 8 ? k + 8 : 0;
	case 5:
		return n - k >= 4 ? k + 4 : 0;
	case 2:
		m = varint(p + k, n - k, &v);
		if (!m || v > n - k - m)
			return 0;
		*val = p + k + m;
		*vlen = (size_t)v;
		return k + m + (size_t)v;
	default:
		return 0;
	}
}

static void copy_str(char *dst, size_t cap, const uint8_t *v, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

/* The name (field 1) of a DescriptorProto / EnumDescriptorProto / ServiceDescriptorProto. */
static void child_name(struct dfile *f, const uint8_t *p, size_t n)
{
	const uint8_t *v;
	size_t k, vlen;
	uint32_t num;

	for (; (k = field(p, n, &num, &v, &vlen)); p += k, n -= k)
		if (num == 1 && v && f->ntop < MAX_NAMES) {
			copy_str(f->top[f->ntop++], AM_STR, v, vlen);
			return;
		}
}

static void parse_set(void)
{
	const uint8_t *p = am_descriptor_set, *v;
	size_t n = am_descriptor_set_len, k, vlen;
	uint32_t num;

	parsed = true;
	for (; (k = field(p, n, &num, &v, &vlen)); p += k, n -= k) {
		struct dfile *f;
		const uint8_t *q, *w;
		size_t qn, j, wlen;
		uint32_t fn;
		if (num != 1 || !v || nfiles == MAX_FILES)
			continue;
		f = &files[nfiles++];
		f->p = v;
		f->n = vlen;
		for (q = v, qn = vlen; (j = field(q, qn, &fn, &w, &wlen)); q += j, qn -= j) {
			if (!w)
				continue;
			if (fn == 1)
				copy_str(f->name, sizeof f->name, w, wlen);
			else if (fn == 2)
				copy_str(f->pkg, sizeof f->pkg, w, wlen);
			else if (fn == 4 || fn == 5 || fn == 6) /* message, enum, service */
				child_name(f, w, wlen);
		}
	}
}

/* The file defining a fully qualified symbol (message, enum, service, method or nested
 * name): its package followed by one of its top-level names. */
static const struct dfile *file_of_symbol(const char *sym)
{
	for (size_t i = 0; i < nfiles; i++) {
		const struct dfile *f = &files[i];
		size_t lp = strlen(f->pkg);
		const char *rest;
		if (strncmp(sym, f->pkg, lp) != 0 || sym[lp] != '.')
			continue;
		rest = sym + lp + 1;
		for (size_t t = 0; t < f->ntop; t++) {
			size_t lt = strlen(f->top[t]);
			if (strncmp(rest, f->top[t], lt) == 0 && (rest[lt] == '\0' || rest[lt] == '.'))
				return f;
		}
	}
	return NULL;
}

static const struct dfile *file_of_name(const char *name)
{
	for (size_t i = 0; i < nfiles; i++)
		if (strcmp(files[i].name, name) == 0)
			return &files[i];
	return NULL;
}

grpc_byte_buffer *am_reflect(grpc_byte_buffer *req)
{
	Grpc__Reflection__V1alpha__ServerReflectionRequest *rq;
	Grpc__Reflection__V1alpha__ServerReflectionResponse rp =
		GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__ListServiceResponse ls =
		GRPC__REFLECTION__V1ALPHA__LIST_SERVICE_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__ServiceResponse sv[3], *svp[3];
	Grpc__Reflection__V1alpha__FileDescriptorResponse fd =
		GRPC__REFLECTION__V1ALPHA__FILE_DESCRIPTOR_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__ErrorResponse er =
		GRPC__REFLECTION__V1ALPHA__ERROR_RESPONSE__INIT;
	ProtobufCBinaryData blob;
	const struct dfile *f = NULL;
	char emsg[200];
	grpc_byte_buffer *out;

	if (!parsed)
		parse_set();
	rq = (Grpc__Reflection__V1alpha__ServerReflectionRequest *)am_rpc_unpack(
		&grpc__reflection__v1alpha__server_reflection_request__descriptor, req);
	if (!rq)
		return NULL;
	rp.valid_host = rq->host;
	rp.original_request = rq;
	switch (rq->message_request_case) {
	case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
		for (size_t i = 0; i < 3; i++) {
			grpc__reflection__v1alpha__service_response__init(&sv[i]);
			sv[i].name = (char *)services[i];
			svp[i] = &sv[i];
		}
		ls.n_service = 3;
		ls.service = svp;
		rp.message_response_case =
			GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
		rp.list_services_response = &ls;
		break;
	case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
		f = file_of_name(rq->file_by_filename);
		snprintf(emsg, sizeof emsg, "no file %.150s", rq->file_by_filename);
		break;
	case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL:
		f = file_of_symbol(rq->file_containing_symbol);
		snprintf(emsg, sizeof emsg, "no symbol %.150s", rq->file_containing_symbol);
		break;
	default:
		snprintf(emsg, sizeof emsg, "inca-am defines no extensions");
		break;
	}
	if (f) {
		/* The files import nothing: a file is its own transitive closure. */
		blob.data = (uint8_t *)f->p;
		blob.len = f->n;
		fd.n_file_descriptor_proto = 1;
		fd.file_descriptor_proto = &blob;
		rp.message_response_case =
			GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
		rp.file_descriptor_response = &fd;
	} else if (!rp.message_response_case) {
		er.error_code = GRPC_STATUS_NOT_FOUND;
		er.error_message = emsg;
		rp.message_response_case =
			GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
		rp.error_response = &er;
	}
	out = am_rpc_pack(&rp.base);
	protobuf_c_message_free_unpacked(&rq->base, NULL);
	return out;
}

grpc_byte_buffer *am_health(struct am *am, grpc_byte_buffer *req, bool watch,
			    grpc_status_code *st, char *msg, size_t cap)
{
	Grpc__Health__V1__HealthCheckRequest *rq;
	Grpc__Health__V1__HealthCheckResponse rp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	bool known = false;
	grpc_byte_buffer *out;

	*st = GRPC_STATUS_OK;
	rq = (Grpc__Health__V1__HealthCheckRequest *)am_rpc_unpack(
		&grpc__health__v1__health_check_request__descriptor, req);
	if (!rq) {
		*st = GRPC_STATUS_INVALID_ARGUMENT;
		snprintf(msg, cap, "bad HealthCheckRequest");
		return NULL;
	}
	known = !rq->service[0];
	for (size_t i = 0; i < 3; i++)
		known |= strcmp(rq->service, services[i]) == 0;
	if (!known && !watch) {
		*st = GRPC_STATUS_NOT_FOUND;
		snprintf(msg, cap, "unknown service %.100s", rq->service);
		protobuf_c_message_free_unpacked(&rq->base, NULL);
		return NULL;
	}
	rp.status = !known ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN :
		    am->shutting_down ?
			     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING :
			     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
	out = am_rpc_pack(&rp.base);
	protobuf_c_message_free_unpacked(&rq->base, NULL);
	return out;
}
