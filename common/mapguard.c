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
 *
 * A library loaded into a program that did not ask for it (the Python
 * module) installs the handler in front of whatever SIGBUS handler the
 * program has (ims_mapguard_install_over): after its line it puts that
 * handler back and returns, so the read faults again and the program's
 * handler sees the fault as it was (the address, the registers), as if
 * nothing had stood in front of it.
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
/* install_over's: the disposition found, handed the fault after the line */
static struct sigaction guard_before;
static atomic_int guard_chains;
static atomic_flag guard_once = ATOMIC_FLAG_INIT;
static atomic_flag guard_said = ATOMIC_FLAG_INIT; /* the line was written */

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
	int fault = si && si->si_code > 0;
	const char *path = fault ? ims_mapguard_find(si->si_addr) : NULL;
	int chains = atomic_load(&guard_chains);
	if (!path) {
		/* not ours: what was there before, as if no handler were here;
		 * a fault returns to its read, which faults again there */
		if (chains)
			sigaction(sig, &guard_before, NULL);
		else
			signal(sig, SIG_DFL);
		if (!chains || !fault)
			raise(sig);
		return;
	}
	if (atomic_flag_test_and_set(&guard_said)) {
		/* another thread met the shrunk file too (the loader's workers
		 * read side by side) and is saying so: one line, not one per
		 * thread; its _exit ends this thread, or the program's handler
		 * gets this thread's fault as well */
		if (!chains)
			for (;;)
				pause();
		sigaction(sig, &guard_before, NULL);
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
	if (!chains)
		_exit(1);
	/* the program's handler gets the fault: back to the read */
	sigaction(sig, &guard_before, NULL);
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

int ims_mapguard_install_over(const char *prefix)
{
	if (atomic_flag_test_and_set(&guard_once))
		return 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	struct sigaction before;
	if (sigaction(SIGBUS, NULL, &before) != 0) {
		atomic_flag_clear(&guard_once);
		return ims_fail(NULL, IMS_EIO, "sigaction");
	}
	/* the default action stays the tools' (a line and exit 1); anything
	 * else, SIG_IGN included (a fault is not ignorable: the kernel
	 * kills), is handed the fault after the line */
	int chains = (before.sa_flags & SA_SIGINFO) || before.sa_handler != SIG_DFL;
	if (chains && (before.sa_flags & SA_SIGINFO) && before.sa_sigaction == on_sigbus)
		return 0; /* ims_mapguard_install was here first */
	guard_before = before;
	atomic_store(&guard_prefix, prefix);
	atomic_store(&guard_chains, chains);
	RETURN_IF(sigaction(SIGBUS, &sa, NULL) != 0, NULL, IMS_EIO, "sigaction");
	return 0;
}
