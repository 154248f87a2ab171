/* summary.c - the summary of a job: its attempts, failures, time lost */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <limits.h>
#include <stdio.h>

#include "common/clock.h"
#include "summary.h"

static const char *outcome_name (enum outcome o)
{
    switch (o) {
        case OUT_COMPLETED:
            return "completed";
        case OUT_SUSPENDED:
            return "suspended";
        case OUT_RELAUNCH:
            return "failed, relaunched";
        case OUT_FAILED:
            return "failed";
        case OUT_INTERRUPTED:
            return "interrupted";
    }
    return "?";
}

void summary_print (const struct job *j, const struct job_end *end)
{
    const char *final = end->state, *final_why = end->why[0] ? end->why : NULL;
    int status = end->status;
    char path[PATH_MAX];
    FILE *files[2] = {stderr, NULL};
    int inplace = 0, relaunches = 0, grows = 0;
    double inplace_ms = 0, relaunch_lost = 0, total = mono_now () - j->t0;

    if (!j->o.dry_run) {
        snprintf (path, sizeof (path), "%s/summary.txt", j->run_dir);
        files[1] = fopen (path, "w");
    }
    for (int i = 0; i < j->natt; i++) {
        inplace += j->att[i].reshards - j->att[i].grows;
        inplace_ms += j->att[i].reshard_ms - j->att[i].grow_ms;
        grows += j->att[i].grows;
        if (j->att[i].outcome == OUT_RELAUNCH && i + 1 < j->natt) {
            relaunches++;
            double from = j->att[i].t_failure > 0 ? j->att[i].t_failure : j->att[i].t_end;
            relaunch_lost += j->att[i + 1].t_start - from;
        }
    }
    for (int k = 0; k < 2; k++) {
        FILE *f = files[k];
        if (!f)
            continue;
        fprintf (f,
                 "%s: summary: %s (exit %d) after %d attempt%s in %.1f s\n",
                 MPIRUN_PROG,
                 final,
                 status,
                 j->natt,
                 j->natt == 1 ? "" : "s",
                 total);
        fprintf (f,
                 "  mode: %s (Open MPI %s, %s)%s\n",
                 j->mi.ulfm ? "in-place recovery (ULFM) + relaunch"
                            : "relaunch-only (no ULFM)",
                 j->mi.version,
                 j->mi.path,
                 j->o.wrap ? ", ranks under elastic-exec" : "");
        for (int i = 0; i < j->natt; i++) {
            const struct attempt *a = &j->att[i];
            fprintf (f,
                     "  attempt %d: %.1f s, %d rank%s on %s%s: %s (mpirun exit %d)",
                     a->number,
                     a->t_end - a->t_start,
                     a->np,
                     a->np == 1 ? "" : "s",
                     a->hosts,
                     a->resumed ? ", resumed from L3" : "",
                     outcome_name (a->outcome),
                     a->exit_code);
            if (a->why[0] && a->outcome != OUT_COMPLETED)
                fprintf (f, " - %s", a->why);
            fprintf (f, "\n");
            if (a->reshards - a->grows)
                fprintf (f,
                         "    in-place recoveries: %d (%.1f ms in all)",
                         a->reshards - a->grows,
                         a->reshard_ms - a->grow_ms);
            if (a->grows)
                fprintf (f,
                         "%sgrowths into new processes: %d (%.1f ms in all)",
                         a->reshards - a->grows ? "; " : "    ",
                         a->grows,
                         a->grow_ms);
            if (a->reshards)
                fprintf (f, ": %s\n", a->reshard_lines);
            if (a->excluded[0])
                fprintf (f, "    excluded: %s\n", a->excluded);
            if (a->spares[0])
                fprintf (f, "    %s\n", a->spares);
            if (a->outcome == OUT_RELAUNCH && i + 1 < j->natt) {
                double from = a->t_failure > 0 ? a->t_failure : a->t_end;
                fprintf (f,
                         "    lost to this failure: %.2f s from the failure report to "
                         "the relaunch "
                         "(plus the work since the snapshot it resumes from)\n",
                         j->att[i + 1].t_start - from);
            }
        }
        fprintf (f,
                 "  failures: %d in place (%.1f ms lost to recovery), %d relaunch%s "
                 "(%.2f s lost "
                 "between failure and relaunch)\n",
                 inplace,
                 inplace_ms,
                 relaunches,
                 relaunches == 1 ? "" : "es",
                 relaunch_lost);
        if (grows)
            fprintf (f,
                     "  growths: %d (ranks lost in place replaced by new processes)\n",
                     grows);
        if (!j->local) {
            char d[1024];
            hostlist_describe (j->hl, d, sizeof (d));
            fprintf (f, "  hosts: %s\n", d);
        }
        fprintf (f,
                 "  final state: %s%s%s\n",
                 final,
                 final_why ? " - " : "",
                 final_why ? final_why : "");
        if (!j->o.dry_run)
            fprintf (f, "  run directory: %s\n", j->run_dir);
    }
    if (files[1])
        fclose (files[1]);
}
