-- Scenario 5 (seed 003): the seed's two-UPDATE script.  The expression
-- c1->>'prenom' keeps its value; only c1's "valeur" changes.  Simple query
-- mode: :id inside the literal is replaced as in the seed.
\set id  random(1, 100000)
\set id2  random(1, 100000)

UPDATE t5 SET c1 = '{"valeur": ":id", "prenom": "guillaume"}' WHERE c2=2;
UPDATE t5 SET c1 = '{"valeur": ":id2", "prenom": "adrien"}' WHERE c2=1;
