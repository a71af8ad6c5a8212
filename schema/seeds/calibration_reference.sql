-- Shipped rows of calibration_reference (gpu, level, eps_pj, citation); see schema/tables/settings.sql.
SELECT * FROM (VALUES
    ('NVIDIA A100 (published)', 'shared', 82.1, 'METHOD.md section 7, A100 at base clock'),
    ('NVIDIA A100 (published)', 'l1', 107, 'METHOD.md section 7, A100 at base clock'),
    ('NVIDIA A100 (published)', 'l2', 368, 'METHOD.md section 7, A100 at base clock'),
    ('NVIDIA A100 (published)', 'dram', 2090, 'METHOD.md section 7, A100 at base clock')
) AS t(gpu, level, eps_pj, citation);
