-- Ad-hoc SQL's starting points. The kernels table also holds the kernels of ncu
-- reports (replayed, serialized, without start times): sums over it count a
-- profiled kernel twice. trace_kernels is the GPU activity the traces recorded,
-- and nothing else; join kernel_layers (run, kernel_id) for the layer type.

-- GPU activity (kernels, memcpy, memset) of trace runs only: the kernels table
-- without the ncu reports' replayed kernels.
CREATE OR REPLACE VIEW trace_kernels AS
SELECT k.*
FROM kernels k
WHERE k.run IN (SELECT run FROM runs WHERE kind = 'trace');
