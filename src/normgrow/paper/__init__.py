"""The paper's analysis: collecting the phases' results, statistics, the tables, the claim
verdicts, the figures and the report. Reads what training wrote; imports neither torch nor
transformers (a test checks it), so it runs wherever pandas and matplotlib do."""
