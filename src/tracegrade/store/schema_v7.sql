-- Schema version 7: the grading tables join the versioned schema.
--
-- Recorded runs (eval_runs, eval_case_results, eval_results, eval_run_cases), judge calibrations
-- (calibrations) and online grading jobs (grading_jobs) used to be created by the code that first wrote them; a store of any version may hold
-- them already, with these very columns. As part of the schema they exist in every store, read-only
-- opens included, and a lake derives them from here like the other tables. SCHEMA.md describes them.

CREATE TABLE IF NOT EXISTS eval_runs (
    run_id        VARCHAR PRIMARY KEY,
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
    case_results  BLOB
);
-- a store whose eval_runs predates case_results (its older runs keep whole reports in report)
ALTER TABLE eval_runs ADD COLUMN IF NOT EXISTS case_results BLOB;

CREATE TABLE IF NOT EXISTS eval_case_results (
    run_id          VARCHAR,
    eval_id         VARCHAR,
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
    PRIMARY KEY (run_id, eval_id)
);

CREATE TABLE IF NOT EXISTS eval_results (
    run_id        VARCHAR,
    eval_id       VARCHAR,
    trace_id      VARCHAR,
    criterion     VARCHAR,
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
    PRIMARY KEY (run_id, eval_id, criterion)
);

CREATE TABLE IF NOT EXISTS eval_run_cases (
    run_id  VARCHAR,
    eval_id VARCHAR,
    result  JSON,
    PRIMARY KEY (run_id, eval_id)
);

CREATE TABLE IF NOT EXISTS grading_jobs (
    job_id        VARCHAR PRIMARY KEY,
    rule          VARCHAR,
    trace_id      VARCHAR,
    status        VARCHAR,
    owner         VARCHAR,
    lease_expires TIMESTAMP,
    attempts      INTEGER,
    created_at    TIMESTAMP,
    updated_at    TIMESTAMP,
    run_id        VARCHAR,
    error         VARCHAR
);

CREATE TABLE IF NOT EXISTS calibrations (
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
    PRIMARY KEY (criterion, judge_model, prompt_version)
);
