/* signame.c - signal names (see signame.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "signame.h"

static const struct {
    int num;
    const char *name;
} signals[] = {
    {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
    {SIGILL, "SIGILL"},       {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
    {SIGBUS, "SIGBUS"},       {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
    {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
    {SIGCHLD, "SIGCHLD"},     {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},
    {SIGTSTP, "SIGTSTP"},     {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},
    {SIGURG, "SIGURG"},       {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
    {SIGIO, "SIGIO"},         {SIGPWR, "SIGPWR"},   {SIGSYS, "SIGSYS"},
};

const char *signal_name (int signum)
{
    static char buf[32];

    for (size_t i = 0; i < sizeof (signals) / sizeof (signals[0]); i++)
        if (signals[i].num == signum)
            return signals[i].name;
    if (signum >= SIGRTMIN && signum <= SIGRTMAX)
        snprintf (buf, sizeof (buf), "SIGRTMIN+%d", signum - SIGRTMIN);
    else
        snprintf (buf, sizeof (buf), "SIG%d", signum);
    return buf;
}

int signal_parse (const char *s)
{
    char *end;
    long v;

    if (!s || *s == '\0')
        return -1;
    if (isdigit ((unsigned char)*s)) {
        errno = 0;
        v = strtol (s, &end, 10);
        if (errno || *end || v <= 0 || v >= NSIG)
            return -1;
        return (int)v;
    }
    if (strncasecmp (s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof (signals) / sizeof (signals[0]); i++)
        if (strcasecmp (s, signals[i].name + 3) == 0)
            return signals[i].num;
    return -1;
}

int signal_list_parse (const char *what,
                       const char *s,
                       sigset_t *set,
                       elastic_error_t *err)
{
    char buf[1024], *tok, *save = NULL;

    sigemptyset (set);
    if (!s || strlen (s) >= sizeof (buf))
        return errprintf (err, "%s: value too long", what);
    strcpy (buf, s);
    for (tok = strtok_r (buf, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        while (isspace ((unsigned char)*tok))
            tok++;
        for (char *e = tok + strlen (tok); e > tok && isspace ((unsigned char)e[-1]); e--)
            e[-1] = '\0';
        int sig = signal_parse (tok);
        if (sig < 0 || sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD)
            return errprintf (
                err,
                "%s: '%s' is not a signal that can be handled (expected names such as "
                "SIGTERM,SIGUSR1 or numbers, not SIGKILL/SIGSTOP/SIGCHLD)",
                what,
                tok);
        sigaddset (set, sig);
    }
    return 0;
}

void signal_list_format (const sigset_t *set, char *buf, size_t size)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember (set, sig) != 1)
            continue;
        int len = snprintf (buf + n, size - n, "%s%s", n ? "," : "", signal_name (sig));
        if (len < 0 || (size_t)len >= size - n)
            break;
        n += (size_t)len;
    }
}

int signal_default_terminates (int sig)
{
    switch (sig) {
        case SIGCHLD:
        case SIGCONT:
        case SIGSTOP:
        case SIGTSTP:
        case SIGTTIN:
        case SIGTTOU:
        case SIGURG:
        case SIGWINCH:
            return 0;
    }
    return sig > 0 && sig < NSIG;
}
