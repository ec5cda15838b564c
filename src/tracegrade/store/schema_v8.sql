-- Schema version 8: the grading tables' rows carry their tenant, and their keys lead with it.
--
-- A run (and its cases and results), a judge calibration and an online grading job are the tenant's that
-- recorded them; the rows stored before are tenant 'default''s. Recording a run under an id another tenant
-- uses records a run of the recorder's own: it never replaces theirs. The tables with a key are copied,
-- since DuckDB cannot change a primary key in place; grading_jobs keeps job_id as its key (a job id names
-- its tenant: see evaluation/worker.py) and gains the column.

CREATE TABLE eval_runs_v8 (
    run_id        VARCHAR NOT NULL,
    created_at    TIMESTAMP,
    kind          VARCHAR,
    eval_set_id   VARCHAR,
    eval_set_name VARCHAR,
    total_cases   INTEGER,
    passed_cases  INTEGER,
    failed_cases  INTEGER,
    error_cases   INTEGER,
    pass_rate     DOUBLE,
    config        JSON,
    metadata      JSON,
    report        JSON,
    case_results  BLOB,
    tenant        VARCHAR NOT NULL,
    PRIMARY KEY (tenant, run_id)
);
INSERT INTO eval_runs_v8 (
    run_id, created_at, kind, eval_set_id, eval_set_name, total_cases, passed_cases, failed_cases,
    error_cases, pass_rate, config, metadata, report, case_results,
    tenant
)
SELECT
    run_id, created_at, kind, eval_set_id, eval_set_name, total_cases, passed_cases, failed_cases,
    error_cases, pass_rate, config, metadata, report, case_results,
    'default'
FROM eval_runs;
DROP TABLE eval_runs;
ALTER TABLE eval_runs_v8 RENAME TO eval_runs;

CREATE TABLE eval_case_results_v8 (
    run_id          VARCHAR NOT NULL,
    eval_id         VARCHAR NOT NULL,
    name            VARCHAR,
    trace_id        VARCHAR,
    trace_ids       JSON,
    passed          BOOLEAN,
    error           VARCHAR,
    mean_score      DOUBLE,
    duration_s      DOUBLE,
    actual_response VARCHAR,
    tool_names      JSON,
    node_visits     JSON,
    tenant          VARCHAR NOT NULL,
    PRIMARY KEY (tenant, run_id, eval_id)
);
INSERT INTO eval_case_results_v8 (
    run_id, eval_id, name, trace_id, trace_ids, passed, error, mean_score, duration_s, actual_response,
    tool_names, node_visits,
    tenant
)
SELECT
    run_id, eval_id, name, trace_id, trace_ids, passed, error, mean_score, duration_s, actual_response,
    tool_names, node_visits,
    'default'
FROM eval_case_results;
DROP TABLE eval_case_results;
ALTER TABLE eval_case_results_v8 RENAME TO eval_case_results;

CREATE TABLE eval_results_v8 (
    run_id        VARCHAR NOT NULL,
    eval_id       VARCHAR NOT NULL,
    trace_id      VARCHAR,
    criterion     VARCHAR NOT NULL,
    score         DOUBLE,
    passed        BOOLEAN,
    threshold     DOUBLE,
    skipped       BOOLEAN,
    error         VARCHAR,
    reason        VARCHAR,
    details       JSON,
    input_tokens  BIGINT,
    output_tokens BIGINT,
    cost_usd      DOUBLE,
    tenant        VARCHAR NOT NULL,
    PRIMARY KEY (tenant, run_id, eval_id, criterion)
);
INSERT INTO eval_results_v8 (
    run_id, eval_id, trace_id, criterion, score, passed, threshold, skipped, error, reason, details,
    input_tokens, output_tokens, cost_usd,
    tenant
)
SELECT
    run_id, eval_id, trace_id, criterion, score, passed, threshold, skipped, error, reason, details,
    input_tokens, output_tokens, cost_usd,
    'default'
FROM eval_results;
DROP TABLE eval_results;
ALTER TABLE eval_results_v8 RENAME TO eval_results;

CREATE TABLE eval_run_cases_v8 (
    run_id  VARCHAR NOT NULL,
    eval_id VARCHAR NOT NULL,
    result  JSON,
    tenant  VARCHAR NOT NULL,
    PRIMARY KEY (tenant, run_id, eval_id)
);
INSERT INTO eval_run_cases_v8 (
    run_id, eval_id, result,
    tenant
)
SELECT
    run_id, eval_id, result,
    'default'
FROM eval_run_cases;
DROP TABLE eval_run_cases;
ALTER TABLE eval_run_cases_v8 RENAME TO eval_run_cases;

CREATE TABLE calibrations_v8 (
    criterion       VARCHAR NOT NULL,
    judge_model     VARCHAR NOT NULL,
    prompt_version  VARCHAR NOT NULL,
    created_at      TIMESTAMP NOT NULL,
    slot            VARCHAR,
    threshold       DOUBLE,
    num_samples     INTEGER,
    labelled_items  INTEGER,
    items           INTEGER,
    accuracy        DOUBLE,
    kappa           DOUBLE,
    kappa_linear    DOUBLE,
    kappa_quadratic DOUBLE,
    spearman        DOUBLE,
    entry           JSON NOT NULL,
    tenant          VARCHAR NOT NULL,
    PRIMARY KEY (tenant, criterion, judge_model, prompt_version)
);
INSERT INTO calibrations_v8 (
    criterion, judge_model, prompt_version, created_at, slot, threshold, num_samples, labelled_items,
    items, accuracy, kappa, kappa_linear, kappa_quadratic, spearman, entry,
    tenant
)
SELECT
    criterion, judge_model, prompt_version, created_at, slot, threshold, num_samples, labelled_items,
    items, accuracy, kappa, kappa_linear, kappa_quadratic, spearman, entry,
    'default'
FROM calibrations;
DROP TABLE calibrations;
ALTER TABLE calibrations_v8 RENAME TO calibrations;

ALTER TABLE grading_jobs ADD COLUMN IF NOT EXISTS tenant VARCHAR DEFAULT 'default';
ALTER TABLE grading_jobs ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE grading_jobs ALTER COLUMN tenant SET NOT NULL;
