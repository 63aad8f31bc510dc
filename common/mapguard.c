/*
 * mapguard.c - names the file behind a SIGBUS.
 *
 * A read through a memory map of a file that has since shrunk faults with
 * SIGBUS: the kernel has no page to give. Readers cannot check their way
 * out of it entirely (a size check before each record leaves the window
 * between the check and the last byte read), so the fault itself has to
 * be turned into a message. A signal handler can only look at memory it
 * can reach without locks or allocation, hence this process-wide registry:
 * fixed-size chunks of slots that are never freed, claimed and released
 * with atomic operations, read by the handler with plain acquire loads.
 *
 * The handler exits rather than jumping back into the reader: the fault
 * can land anywhere (inside LMDB, inside libjpeg, in a memcpy), and
 * nothing that was interrupted there could be trusted afterwards.
 */
#define _GNU_SOURCE
#include "common.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 256
#define CLAIMED ((uintptr_t)1) /* base while a slot is being filled */

typedef struct guard_slot {
	_Atomic uintptr_t base; /* 0: free */
	size_t len;
	const char *path;
} guard_slot;

typedef struct guard_chunk {
	guard_slot slot[SLOTS];
	int first;                /* handle of slot[0] */
	struct guard_chunk *next; /* older chunk; fixed once published */
} guard_chunk;

static _Atomic(guard_chunk *) chunks;
static const char *_Atomic guard_prefix;

int ims_mapguard_add(const void *base, size_t len, const char *path)
{
	if (!base || (uintptr_t)base == CLAIMED)
		return -1;
	for (;;) {
		guard_chunk *head = atomic_load_explicit(&chunks, memory_order_acquire);
		for (guard_chunk *c = head; c; c = c->next)
			for (int i = 0; i < SLOTS; i++) {
				uintptr_t want = 0;
				if (!atomic_compare_exchange_strong(&c->slot[i].base, &want,
								    CLAIMED))
					continue;
				c->slot[i].len = len;
				c->slot[i].path = path;
				atomic_store_explicit(&c->slot[i].base, (uintptr_t)base,
						      memory_order_release);
				return c->first + i;
			}
		guard_chunk *n = calloc(1, sizeof(*n));
		if (!n)
			return -1;
		n->first = head ? head->first + SLOTS : 0;
		n->next = head;
		if (!atomic_compare_exchange_strong(&chunks, &head, n))
			free(n); /* another thread added one: look again */
	}
}

void ims_mapguard_remove(int handle)
{
	if (handle < 0)
		return;
	for (guard_chunk *c = atomic_load_explicit(&chunks, memory_order_acquire);
	     c; c = c->next)
		if (handle >= c->first && handle < c->first + SLOTS) {
			atomic_store_explicit(&c->slot[handle - c->first].base, 0,
					      memory_order_release);
			return;
		}
}

const char *ims_mapguard_find(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	for (guard_chunk *c = atomic_load_explicit(&chunks, memory_order_acquire);
	     c; c = c->next)
		for (int i = 0; i < SLOTS; i++) {
			uintptr_t b = atomic_load_explicit(&c->slot[i].base,
							   memory_order_acquire);
			if (b > CLAIMED && a >= b && a - b < c->slot[i].len)
				return c->slot[i].path;
		}
	return NULL;
}

/* Appends s to buf (of len bytes, *at used), cutting what does not fit. */
static void put(char *buf, size_t len, size_t *at, const char *s)
{
	while (*s && *at + 1 < len)
		buf[(*at)++] = *s++;
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	/* si_code > 0: raised by a fault (not sent by kill), so si_addr is
	 * the address that was read */
	const char *path = si && si->si_code > 0 ? ims_mapguard_find(si->si_addr) : NULL;
	if (!path) {
		/* not ours: the default action, as if no handler were here */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	/* one write: the line stays whole beside other processes' output */
	const char *prefix = atomic_load(&guard_prefix);
	char line[4608];
	size_t n = 0;
	put(line, sizeof(line), &n, prefix ? prefix : "imshard");
	put(line, sizeof(line), &n, ": cannot read '");
	put(line, sizeof(line) - 128, &n, path); /* room left for the end */
	put(line, sizeof(line), &n,
	    "': the file shrank while it was being read (truncated or rewritten in place?); stopping\n");
	ssize_t w = write(STDERR_FILENO, line, n);
	(void)w;
	_exit(1);
}

int ims_mapguard_install(const char *prefix)
{
	atomic_store(&guard_prefix, prefix);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	RETURN_IF(sigaction(SIGBUS, &sa, NULL) != 0, NULL, IMS_EIO, "sigaction");
	return 0;
}
