"""Running evaluations: the grading engine, live runs (AgentEvaluator), offline grading and simulation."""
