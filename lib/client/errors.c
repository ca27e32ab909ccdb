/* inca_strerror: messages for the negative errno values libinca returns, phrased for what
 * they mean in INCA. Static strings only (thread-safe, nothing to free). */
#include <errno.h>
#include <string.h>

#include "inca/inca.h"

const char *inca_strerror(int err)
{
	const char *s;

	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument or option (or a struct size that is 0 or too small: "
		       "initialise inca_comm_opts with inca_comm_opts_init, pass sizeof *out "
		       "to the getters)";
	case E2BIG:
		return "options struct from a newer libinca header sets fields this library "
		       "does not know";
	case ENOTSUP:
		return "not supported (no switch configured, or type/op pair not reducible)";
	case ETIMEDOUT:
		return "timed out (peers missing, or INC retransmission limit reached)";
	case EADDRINUSE:
		return "address already in use";
	case ENOMEM:
		return "out of memory";
	case EIO:
		return "host path broken by an earlier failure; create a new communicator";
	case EPROTO:
		return "ranks disagree on the collective (count, type, op or call order)";
	case ECONNRESET:
	case EPIPE:
		return "a peer rank died or closed its connection (the communicator is unusable)";
	case EMSGSIZE:
		return "packet larger than the path MTU allows (lower the mtu option)";
	case ENOKEY:
		return "no data-plane key for the switch (give auth_key / INCA_AUTH_KEY, or opt "
		       "out with no_auth / INCA_AUTH=off)";
	default:
		break;
	}
	/* glibc >= 2.32: static description, no locale buffer. */
	s = strerrordesc_np(err);
	return s ? s : "unknown error";
}
