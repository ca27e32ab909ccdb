/* inca-switch NETCONF server: the poll thread's look at each session's next message before
 * libnetconf2 reads it. libnetconf2 2.0.24 parses an <rpc> with libyang and answers one whose
 * operation no loaded module defines with operation-failed, before any callback of ours runs;
 * RFC 6241 wants operation-not-supported. So the next message is peeked (never consumed unless
 * it is such an RPC): an <rpc> whose first child names no RPC of the schema is read here and
 * answered operation-not-supported; everything else is left to libnetconf2, untouched. */
#include "netconf_int.h"

#define SCREEN_HOLD_MS 10000    /* a message that stays incomplete this long: libnetconf2 */
#define SCREEN_RECHECK_MS 20    /* how often a held session is peeked again */
#define SCREEN_REPLY_MS 10000   /* the client must take our reply within this */
#define NS_BASE "urn:ietf:params:xml:ns:netconf:base:1.0"

enum screen { SCREEN_PASS, SCREEN_HOLD, SCREEN_ANSWERED };

/* ---------------------------------------------------------------- framing */

/* The XML of the next message in buf[0, n) of a session speaking NETCONF 1.0 (end marker) or
 * 1.1 (chunks) into xml (at most NC_SCREEN_CAP bytes). *xml_len: the bytes recovered so far;
 * *msg_len: the bytes the whole message takes on the wire, 0 while incomplete. Returns -1 for
 * framing this code does not follow (then libnetconf2 judges it). */
static int unframe(const char *buf, size_t n, bool v11, char *xml, size_t *xml_len,
		   size_t *msg_len)
{
	*xml_len = *msg_len = 0;
	if (!v11) {
		const char *end = memmem(buf, n, "]]>]]>", 6);
		size_t len = end ? (size_t)(end - buf) : n;

		memcpy(xml, buf, len);
		*xml_len = len;
		if (end)
			*msg_len = len + 6;
		return 0;
	}
	for (size_t off = 0;;) {
		unsigned long long chunk = 0;
		size_t digits = 0;

		if (off + 2 > n)
			return 0;
		if (buf[off] != '\n' || buf[off + 1] != '#')
			return -1;
		off += 2;
		if (off < n && buf[off] == '#') { /* end of chunks: "\n##\n" */
			if (off + 1 >= n)
				return 0;
			if (buf[off + 1] != '\n' || !*xml_len)
				return -1;
			*msg_len = off + 2;
			return 0;
		}
		while (off < n && buf[off] >= '0' && buf[off] <= '9' && digits < 10) {
			chunk = chunk * 10 + (unsigned)(buf[off++] - '0');
			digits++;
		}
		if (off >= n)
			return 0;
		if (!digits || buf[off] != '\n' || !chunk || chunk > 4294967295ull)
			return -1;
		off++;
		size_t take = n - off < chunk ? n - off : (size_t)chunk;
		memcpy(xml + *xml_len, buf + off, take);
		*xml_len += take;
		if (take < chunk)
			return 0;
		off += take;
	}
}

/* ---------------------------------------------------------------- the head of the XML */

enum scan { SCAN_MORE, SCAN_OTHER, SCAN_OK };

struct tag {
	const char *prefix, *local, *attrs; /* attrs: the raw text between the name and '>' */
	size_t prefix_len, local_len, attrs_len;
	bool empty; /* <x/> */
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_name(char c)
{
	return c && !is_space(c) && !strchr("<>/=\"'", c);
}

/* Skip white space, comments and processing instructions up to the next '<' of an element
 * start tag (*p then points at it). */
static enum scan skip_misc(const char **p, const char *end)
{
	const char *s = *p;

	for (;;) {
		while (s < end && is_space(*s))
			s++;
		if (s + 2 > end)
			return SCAN_MORE;
		if (*s != '<')
			return SCAN_OTHER;
		if (s[1] == '?' || s[1] == '!') {
			const char *close = s[1] == '?' ? "?>" : "-->";

			if (s[1] == '!' && (s + 4 > end || memcmp(s, "<!--", 4)))
				return s + 4 > end ? SCAN_MORE : SCAN_OTHER; /* DOCTYPE, CDATA */
			const char *e = memmem(s + 2, (size_t)(end - s - 2), close, strlen(close));
			if (!e)
				return SCAN_MORE;
			s = e + strlen(close);
			continue;
		}
		*p = s;
		return SCAN_OK;
	}
}

/* The start tag at *p ('<'); *p moves past it. */
static enum scan start_tag(const char **p, const char *end, struct tag *t)
{
	const char *s = *p + 1, *name = s, *colon = NULL;
	char quote = 0;

	while (s < end && is_name(*s)) {
		if (*s == ':' && !colon)
			colon = s;
		s++;
	}
	if (s >= end)
		return SCAN_MORE;
	if (s == name || (!is_space(*s) && *s != '>' && *s != '/'))
		return SCAN_OTHER;
	t->prefix = colon ? name : "";
	t->prefix_len = colon ? (size_t)(colon - name) : 0;
	t->local = colon ? colon + 1 : name;
	t->local_len = (size_t)(s - t->local);
	t->attrs = s;
	for (; s < end; s++) {
		if (quote) {
			if (*s == quote)
				quote = 0;
			else if (*s == '<')
				return SCAN_OTHER;
		} else if (*s == '"' || *s == '\'') {
			quote = *s;
		} else if (*s == '>') {
			t->empty = s > t->attrs && s[-1] == '/';
			t->attrs_len = (size_t)(s - t->attrs) - (t->empty ? 1 : 0);
			*p = s + 1;
			return SCAN_OK;
		}
	}
	return SCAN_MORE;
}

/* The value of attribute name (name_len bytes) in a tag's attributes, or NULL. */
static const char *attr(const struct tag *t, const char *name, size_t name_len, size_t *len)
{
	const char *s = t->attrs, *end = t->attrs + t->attrs_len;

	while (s < end) {
		const char *n, *q;
		while (s < end && is_space(*s))
			s++;
		n = s;
		while (s < end && *s != '=' && !is_space(*s))
			s++;
		size_t nl = (size_t)(s - n);
		while (s < end && (is_space(*s) || *s == '='))
			s++;
		if (s >= end || (*s != '"' && *s != '\''))
			return NULL;
		q = memchr(s + 1, *s, (size_t)(end - s - 1));
		if (!q)
			return NULL;
		if (nl == name_len && !memcmp(n, name, nl)) {
			*len = (size_t)(q - s - 1);
			return s + 1;
		}
		s = q + 1;
	}
	return NULL;
}

/* The namespace of tag t (its prefix looked up in t, then in parent), copied into ns. False
 * if it has none this code can name (undeclared, or with a character reference). */
static bool ns_of(const struct tag *t, const struct tag *parent, char *ns, size_t cap)
{
	char name[80];
	const char *v = NULL;
	size_t len = 0;
	int n = t->prefix_len ? snprintf(name, sizeof name, "xmlns:%.*s", (int)t->prefix_len,
					 t->prefix) :
				snprintf(name, sizeof name, "xmlns");

	if (n <= 0 || (size_t)n >= sizeof name)
		return false;
	v = attr(t, name, (size_t)n, &len);
	if (!v && parent)
		v = attr(parent, name, (size_t)n, &len);
	if (!v || len >= cap || memchr(v, '&', len))
		return false;
	memcpy(ns, v, len);
	ns[len] = '\0';
	return true;
}

/* ---------------------------------------------------------------- the verdict */

/* Whether the schema has a top-level RPC local[0, len) in the module of namespace ns. */
static bool known_rpc(const struct sw_netconf *nc, const char *ns, const char *local, size_t len)
{
	const struct lys_module *mod = ly_ctx_get_module_implemented_ns(nc->ly, ns);

	return mod && lys_find_child(NULL, mod, local, len, LYS_RPC, 0);
}

static void xml_escape(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 7 < cap; i++) {
		const char *e = s[i] == '<' ? "&lt;" : s[i] == '>' ? "&gt;" : s[i] == '&' ? "&amp;" :
				NULL;
		if (e) {
			memcpy(out + o, e, strlen(e));
			o += strlen(e);
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
}

/* Send all of buf on the session's descriptor (nonblocking or not) within SCREEN_REPLY_MS. */
static int send_all(int fd, const char *buf, size_t n)
{
	uint64_t deadline = util_now_ns() + SCREEN_REPLY_MS * 1000000ull;

	while (n) {
		ssize_t w = send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			buf += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (util_now_ns() > deadline)
			return -ETIMEDOUT;
		poll(&(struct pollfd){ .fd = fd, .events = POLLOUT }, 1, 100);
	}
	return 0;
}

/* Answer the <rpc> (start tag rpc) whose operation (tag op, namespace ns) the schema lacks:
 * an <rpc-reply> with the rpc's attributes as sent (message-id, namespace declarations) and
 * one operation-not-supported error. */
static int answer(struct nc_sess *sd, bool v11, const struct tag *rpc, const struct tag *op,
		  const char *ns)
{
	char name[256], nsx[512], body[2048], frame[32];
	int p = (int)rpc->prefix_len;
	const char *c = p ? ":" : "";
	int n;

	xml_escape(op->local, op->local_len, name, sizeof name);
	xml_escape(ns, strlen(ns), nsx, sizeof nsx);
	n = snprintf(body, sizeof body,
		     "<%.*s%srpc-reply%.*s><%.*s%srpc-error><%.*s%serror-type>protocol</%.*s%s"
		     "error-type><%.*s%serror-tag>operation-not-supported</%.*s%serror-tag>"
		     "<%.*s%serror-severity>error</%.*s%serror-severity><%.*s%serror-message "
		     "xml:lang=\"en\">unknown operation '%s' in namespace '%s'</%.*s%s"
		     "error-message></%.*s%srpc-error></%.*s%srpc-reply>",
		     p, rpc->prefix, c, (int)rpc->attrs_len, rpc->attrs, p, rpc->prefix, c, p,
		     rpc->prefix, c, p, rpc->prefix, c, p, rpc->prefix, c, p, rpc->prefix, c, p,
		     rpc->prefix, c, p, rpc->prefix, c, p, rpc->prefix, c, name, nsx, p, rpc->prefix,
		     c, p, rpc->prefix, c, p, rpc->prefix, c);
	if (n <= 0 || (size_t)n >= sizeof body)
		return -EOVERFLOW;
	if (v11) {
		int h = snprintf(frame, sizeof frame, "\n#%d\n", n);
		if (send_all(sd->fd, frame, (size_t)h) || send_all(sd->fd, body, (size_t)n))
			return -EIO;
		return send_all(sd->fd, "\n##\n", 4);
	}
	if (send_all(sd->fd, body, (size_t)n))
		return -EIO;
	return send_all(sd->fd, "]]>]]>", 6);
}

/* Look at the session's next message: an <rpc> of an operation the schema lacks is consumed
 * and answered here; one not complete yet holds the session (libnetconf2 must not start
 * reading it); anything else passes to libnetconf2. */
static enum screen screen(struct sw_netconf *nc, struct nc_sess *sd)
{
	bool v11 = nc_session_get_version(sd->session) != 0;
	char *buf = nc->screen_buf, *xml = nc->screen_xml, ns[512];
	ssize_t n = recv(sd->fd, buf, NC_SCREEN_CAP, MSG_PEEK | MSG_DONTWAIT);
	size_t xml_len, msg_len;
	const char *s, *end;
	struct tag rpc = { 0 }, op = { 0 };
	const char *mid;
	size_t mid_len;
	enum scan r;

	if (n <= 0 || unframe(buf, (size_t)n, v11, xml, &xml_len, &msg_len) < 0)
		return SCREEN_PASS; /* closed, error, nothing there, or framing for libnetconf2 */
	s = xml;
	end = xml + xml_len;
	r = skip_misc(&s, end);
	if (r == SCAN_OK)
		r = start_tag(&s, end, &rpc);
	if (r == SCAN_OK && (rpc.local_len != 3 || memcmp(rpc.local, "rpc", 3) ||
			     !ns_of(&rpc, NULL, ns, sizeof ns) || strcmp(ns, NS_BASE) || rpc.empty ||
			     !(mid = attr(&rpc, "message-id", 10, &mid_len))))
		return SCREEN_PASS; /* not an <rpc> with a message-id: libnetconf2's to judge */
	if (r == SCAN_OK)
		r = skip_misc(&s, end);
	if (r == SCAN_OK && s + 1 < end && s[1] == '/')
		return SCREEN_PASS; /* <rpc></rpc> */
	if (r == SCAN_OK)
		r = start_tag(&s, end, &op);
	if (r == SCAN_MORE)
		return msg_len || (size_t)n == NC_SCREEN_CAP ? SCREEN_PASS : SCREEN_HOLD;
	if (r != SCAN_OK)
		return SCREEN_PASS;
	if (!ns_of(&op, &rpc, ns, sizeof ns))
		ns[0] = '\0';
	if (ns[0] && known_rpc(nc, ns, op.local, op.local_len))
		return SCREEN_PASS;
	if (!msg_len) /* unknown: wait for the whole message to consume it */
		return (size_t)n == NC_SCREEN_CAP ? SCREEN_PASS : SCREEN_HOLD;

	/* The tags point into xml, which the consuming read below does not touch. */
	if (recv(sd->fd, buf, msg_len, MSG_DONTWAIT) != (ssize_t)msg_len) {
		shutdown(sd->fd, SHUT_RDWR); /* out of step with the stream: end the session */
		return SCREEN_PASS;
	}
	nc->in_bad_rpcs++;
	sd->in_bad_rpcs++;
	nc->out_rpc_errors++;
	sd->out_rpc_errors++;
	sw_log(1, "netconf: session %u: unknown operation '%.*s' (namespace '%s'): "
	       "operation-not-supported", sd->id, (int)op.local_len, op.local, ns);
	if (answer(sd, v11, &rpc, &op, ns) < 0)
		shutdown(sd->fd, SHUT_RDWR);
	return SCREEN_ANSWERED;
}

/* Put a session back into libnetconf2's poll set (its next message was screened). */
static void ps_in(struct sw_netconf *nc, struct nc_sess *sd)
{
	sd->held = false;
	if (!sd->out)
		return;
	sd->out = false;
	if (nc_ps_add_session(nc->ps, sd->session)) {
		sw_log(0, "netconf: session %u lost: cannot poll it again", sd->id);
		shutdown(sd->fd, SHUT_RDWR);
	}
}

/* Take a session out of libnetconf2's poll set: input that arrives later is screened first. */
static void ps_out(struct sw_netconf *nc, struct nc_sess *sd)
{
	if (!sd->out && !nc_ps_del_session(nc->ps, sd->session))
		sd->out = true;
}

static void hold(struct sw_netconf *nc, struct nc_sess *sd, uint64_t now)
{
	if (sd->held)
		return;
	ps_out(nc, sd);
	sd->held = true;
	sd->held_since_ns = now;
}

static void screen_session(struct sw_netconf *nc, struct nc_sess *sd)
{
	for (int i = 0; i < 16; i++) { /* a burst of unknown RPCs: a bounded share per round */
		enum screen v = screen(nc, sd);
		uint64_t now = util_now_ns();

		if (v == SCREEN_HOLD &&
		    (!sd->held || now - sd->held_since_ns < SCREEN_HOLD_MS * 1000000ull)) {
			hold(nc, sd, now);
			return;
		}
		ps_in(nc, sd);
		if (v != SCREEN_ANSWERED)
			return;
	}
}

/* Only sessions whose next message was screened here stay in libnetconf2's poll set: a session
 * with nothing to read is taken out, so that a message arriving between this poll and
 * libnetconf2's never reaches libnetconf2 unseen. */
void nc_screen_poll(struct sw_netconf *nc, int timeout_ms)
{
	size_t np = 0, nsess = 0;
	bool any_held = false;

	for (struct nc_sess *sd = nc->sessions; sd; sd = sd->next)
		nsess++;
	if (nsess > nc->screen_cap) {
		struct pollfd *p = realloc(nc->screen_pfd, nsess * sizeof *p);
		struct nc_sess **w = p ? realloc(nc->screen_who, nsess * sizeof *w) : NULL;

		if (p)
			nc->screen_pfd = p;
		if (w) {
			nc->screen_who = w;
			nc->screen_cap = nsess;
		}
	}
	for (struct nc_sess *sd = nc->sessions; sd; sd = sd->next) {
		if (sd->held) {
			any_held = true;
			continue; /* its unread bytes would wake poll at once: peeked below */
		}
		if (np < nc->screen_cap) { /* else (out of memory) libnetconf2 reads it unseen */
			nc->screen_pfd[np] = (struct pollfd){ .fd = sd->fd, .events = POLLIN };
			nc->screen_who[np++] = sd;
		} else {
			ps_in(nc, sd);
		}
	}
	if (any_held && timeout_ms > SCREEN_RECHECK_MS)
		timeout_ms = SCREEN_RECHECK_MS;
	if (poll(nc->screen_pfd, np, timeout_ms) < 0)
		return;
	for (size_t i = 0; i < np; i++) {
		if (nc->screen_pfd[i].revents) /* input, end of stream or an error */
			screen_session(nc, nc->screen_who[i]);
		else
			ps_out(nc, nc->screen_who[i]);
	}
	for (struct nc_sess *sd = nc->sessions; sd && any_held; sd = sd->next)
		if (sd->held)
			screen_session(nc, sd);
}

void nc_screen_release_all(struct sw_netconf *nc)
{
	for (struct nc_sess *sd = nc->sessions; sd; sd = sd->next)
		ps_in(nc, sd);
}
