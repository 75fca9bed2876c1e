/* core/interrupt.c - Ctrl-C as a flag, for the REPL (lua/idxlab/repl.lua).
 *
 * ixl_interrupt_install() replaces SIGINT's disposition with a handler that only sets a
 * volatile sig_atomic_t (async-signal-safe; no Lua, no allocation, no I/O). The flag is
 * polled: by the REPL after a read returns, by the experiment runner between points and by
 * the step between kernels, so a kernel in flight always finishes. SA_RESTART is left off on
 * purpose: a blocking read(2) at the prompt returns EINTR, so the REPL sees Ctrl-C at once
 * and draws a fresh prompt. The library never installs the handler on its own. */
#include <signal.h>
#include <string.h>

#include "idxlab.h"

static volatile sig_atomic_t pending;
static struct sigaction previous;
static int installed;

static void on_sigint(int sig) {
  (void)sig;
  pending = 1;
}

int ixl_interrupt_install(void) {
  if (installed) return 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: see the header of this file */
  if (sigaction(SIGINT, &sa, &previous) != 0) return -1;
  installed = 1;
  return 0;
}

void ixl_interrupt_restore(void) {
  if (!installed) return;
  sigaction(SIGINT, &previous, NULL);
  installed = 0;
}

int ixl_interrupt_installed(void) { return installed; }

int ixl_interrupt_pending(void) { return pending != 0; }

void ixl_interrupt_clear(void) { pending = 0; }
