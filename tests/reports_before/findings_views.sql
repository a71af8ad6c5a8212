-- includes: base

-- Building blocks of the finding rules (rules/*.sql, tracedb advise).
-- Documented in docs/reports.md ("findings").

-- The iterations a finding rule looks at: iteration it_p of each trace run
-- (run_p, or every run when NULL), or the steady one when it_p is NULL, or every
-- iteration when every_p (advise.evaluate_every: the rules' $every), with the
-- step marker's window and the GPU time of iteration_gpu_time.
CREATE OR REPLACE MACRO finding_iterations(run_p, it_p, every_p := false) AS TABLE
SELECT i.run, i.iteration, i.start_ns, i.marker_end_ns, i.end_ns, i.dur_ns,
       g.kernel_busy_ns, g.idle_ns, g.gpu_util_pct
FROM iterations i JOIN iteration_gpu_time g USING (run, iteration)
WHERE (run_p IS NULL OR i.run = run_p) AND (i.iteration = it_p OR (it_p IS NULL AND (g.steady OR every_p)));

-- The evidence's "most:" text: the three names of the largest time in a list of
-- {name, ns} (kernel names cut to the function before its template or arguments),
-- each with its time in ms, largest first; NULL for an empty list.
CREATE OR REPLACE MACRO top_names_text(l) AS
    nullif(array_to_string(list_transform(
        list_slice(list_sort(list_transform(l, lambda x: {'ns': x.ns, 'name': x.name}), 'DESC'), 1, 3),
        lambda x: coalesce(nullif(regexp_extract(x.name, '(\w+)[<(]', 1), ''), left(x.name, 60))
             || ' (' || round(x.ns / 1e6, 2) || ' ms)'), '; '), '');
