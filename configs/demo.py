r"""`make demo`: SFT then GRPO teach SmolLM2-135M-Instruct to answer from the passages (TruthRL's reward, CPU).

  make demo                                   # = python launch/demo.py (all stages below, one process)
  python launch/demo.py --workdir=/tmp/gj_demo --dev   # the same on the dev world (where settings were chosen)
  python launch/demo.py --world=4                      # on any other world (a dev world)
  # each stage on its own (the commands launch/demo.py prints and writes to report.md)
  python launch/evaluate.py --config=configs/demo.py --model=smollm2 --output_dir=/tmp/gj_demo/eval_start
  python launch/sft.py --config=configs/demo.py:sft --workdir=/tmp/gj_demo/sft1
  python launch/sft.py --config=configs/demo.py:sft2 --config.model.path=/tmp/gj_demo/sft1/hf \
      --workdir=/tmp/gj_demo/sft
  python launch/train.py --config=configs/demo.py --config.model.path=/tmp/gj_demo/sft/hf \
      --workdir=/tmp/gj_demo/grpo
  python launch/evaluate.py --config=configs/demo.py --model=smollm2 --model=/tmp/gj_demo/sft \
      --model=/tmp/gj_demo/grpo --label=start --label=SFT --label=GRPO --output_dir=/tmp/gj_demo/eval \
      --curves=/tmp/gj_demo/grpo

Cost: 21.9 min on the idle 2-core CPU, the model cached (world 11 from a clean clone at 81b49a0:
start evaluation 51 s with the model load, SFT 649 s for two passes of 64 steps, ~4.7 s a step, SFT
evaluation 41 s, GRPO 527 s for 12 steps of 64 completions, 38-49 s a step, GRPO evaluation 42 s;
22 min 57 s with `make demo`'s install; world 8 at 4475637 peaked at 8.2 GB resident). Within the
issue's 25 minutes since SFT runs the 236 tokens every row's prompt begins with once per
micro-batch (run 35; before, 26.3-26.6 min, SFT 854-856 s) and evaluation prefills them once a
batch (81b49a0; before, 65-87 s an evaluation). The real-data stage (--real_data) is extra: see
README.

Presets (`:arg`, comma-separated): none — the GRPO stage (configs/demo.py is a GRPO config; the demo
passes --config.model.path=<workdir>/sft/hf, the SFT model); `sft`, `sft2` — the SFT warm-up's
first and second pass (launch/sft.py configs; the second from the first's HF folder); `dev` — all on
the dev world (world seed DEV_SEED instead of WORLD_SEED); `world=N` — all on world N (another dev
world: `python launch/demo.py --world=N`); `runlocal` — the same as none (every configs/*.py has a
:runlocal).

Why TruthRL. Its ternary reward (+1 correct, 0 `\boxed{I don't know}`, −1 wrong or no box) scores
both things a grounded model must do with one short, exactly-checkable answer: answer from the
passages on answerable questions and abstain on unanswerable ones. On the synthetic world the answers
are invented names, so exact match is a faithful verifier here (the paper's collapse under string
matching, Table 5, comes from judging free-form real answers; the warning is still logged). GRACE's
gated reward needs `<evidence>` quotes scored by ROUGE plus `<answer>` tags: more tokens per
completion on a CPU, and its learning check (README) showed no GRPO gain over SFT in 8 steps.

Why unrelated passages in the unanswerable contexts (data.unanswerable="unrelated"). The world's
default unanswerable context ("mentions") keeps passages that name the question's subject, bridge
and answer; TruthRL's metric counts a boxed gold name as correct whatever the context, so a model
that picks a name it saw scored "correct" on 37.5 % of the unanswerable items (run 5's GRPO model):
accuracy there is not grounding. With passages that name none of the question's entities, no
unanswerable item can be answered correctly (the names are invented), so accuracy is answering from
the passages and every non-abstention on those items is a hallucination. It is also the easier
case of the two (retrieval that found nothing relevant, not near misses); runs 1-6 used "mentions".

Why SFT on ANOTHER world, both kinds, two passes over 256 rows (runs 12-26, 31). SmolLM2 never writes
`\boxed{}` on its own (reward −1 on every sample: zero within-group variance, no gradient), so SFT
teaches the format first. Its rows are SFT_EXAMPLES questions of world seed + SFT_WORLD_OFFSET (other
invented entities: no fact, question or passage of the evaluated world), three quarters answerable
(gold: think, quote the passage, box the name; half until run 30) and the rest over unrelated
passages with the target `\boxed{I don't know}`.
So SFT teaches reading and abstaining as skills, not the evaluated world's facts, and GRPO starts
from a model that already tells the two kinds apart (runs 15, 20, 21: abstention 53-97 %, accuracy
56-62 %). Two passes, because after one GRPO found the refusal corner (runs 15-19): the model's
sampled accuracy on answerable prompts was far below its greedy one, and on such a prompt an
abstention's GRPO advantage is positive whenever the group's wrong answers outnumber its right ones.
SFT on the evaluated world's own training draw (runs 1-11: 32-64 rows, answerable only or both
kinds) taught the format but no abstention, or an abstention bias that varied from world to world
(9 %, 78 %, 97 %), and GRPO then went to one corner or the other.

How the settings were chosen (dev worlds: seeds 1 and 4, and 2 and 3 once spent; runs 3 and 6 on
then-reported worlds). Runs 1-6 with unanswerable="mentions":
  1. SFT one pass over 32 rows of both kinds, GRPO 8 steps of 4 prompts × G=4 at lr 3e-5: SFT
     truthfulness −68.8 (accuracy on answerable 12.5 %, abstention on unanswerable 9.4 %) → GRPO 0:
     abstention 100 %, accuracy 0 % — a gain by refusing everything.
  2. SFT two passes over 64 rows of both kinds, GRPO 12 steps of 4 × G=8 at lr 1e-5: SFT −14.1
     (50 %, 12.5 %) → GRPO +25.0 (87.5 %, 0 %); GRPO − SFT +39.1 [+18.8, +60.9].
  3. The same settings on world 0 (then the reported world): SFT 0.0 (25 %, 78 %) → GRPO −28.1
     (59 %, 6 %): GRPO again learned to answer (accuracy up 34 points) and gave up abstaining, which
     this SFT had happened to favour. World 0's held-out items having been looked at, the report
     moved to a fresh world (WORLD_SEED = 2) and the settings went back to the dev world.
  4. SFT on the answerable rows only, three passes: SFT +3.1 (78 %, 0 %) → GRPO 0.0 (78 %, 0 %);
     the SFT policy was too peaked (entropy 0.1) for GRPO to find anything in 12 steps.
  5. SFT on the answerable rows only, one pass: SFT −53.1 (21.9 %, 0 %) → GRPO −6.2 (56.2 %, 0 %);
     GRPO − SFT +46.9 [+21.9, +71.9] truthfulness, +0.47 [+0.22, +0.72] reward.
  6. Run 5's settings on world 2 (then the reported world), once: SFT −6.2 (50 %, 0 %) → GRPO 0.0
     (0 %, 100 %): GRPO found `\boxed{I don't know}` and abstained on everything.
Then, GRPO from run 5's or run 6's SFT model (world 2 is a dev world from here on):
  7. run 5 with rollout temperature 0.7: samples boxed more often, but 50-75 % of groups had zero
     variance; GRPO − SFT +12.5 [−12.5, +37.5] (40.6 %, 0 %).
  8. run 6 with Dr.GRPO's advantages (advantage.scale="none": a lone abstention among wrong
     answers no longer scores like a lone correct answer): no refusal corner, and no gain: −12.5
     [−37.5, +12.5] (46.9 %, 0 %).
  9. run 5 with unanswerable="unrelated" (GRPO and evaluation): SFT −78.1 (21.9 %, 0 %) → GRPO
     −56.2 (43.8 %, 0 %); +21.9 [+0, +43.8].
 10. run 6 with unanswerable="unrelated": SFT −50 (50 %, 0 %) → GRPO 0 (0 %, 100 %); +50 [+28.1,
     +71.9] — by refusing everything.
 11. world 4, unrelated, SFT one pass over both kinds (16 steps): SFT +1.6 (6.2 %, 96.9 %); GRPO's
     groups were all abstentions by step 8 (refusal corner; stopped there).
Then SFT on ANOTHER world (--config.data.seed=<world + 1000>: questions about other invented
entities, so no fact of the evaluated world), lr 5e-5 cosine, batches of 4, evaluated on dev world 1
(runs 12-16, 18, 19) or 4 (run 17) with this file's GRPO stage unless said:
 12. 128 answerable rows (num_examples=256, answerable_only), 32 steps: SFT −9.4 (90.6 %, 0 %) — it
     reads (a name from the passage that answers the asked relation) without having seen the world;
     GRPO sampled no abstention in 5 steps and its groups went 25 → 100 % zero-variance (stopped).
 13. 128 answerable + 32 abstention rows (160, answerable_ratio 0.8, answerable_only=False), 40
     steps: SFT −50 (50 %, 0 %).
 14. 192 + 64 (256, ratio 0.75), 64 steps: SFT −43.8 (56.2 %, 0 %).
 15. run 12's 128 rows + 128 abstention rows (256, ratio 0.5), 64 steps: SFT −9.4 (62.5 %, 53.1 %),
     the first SFT model that tells the two kinds apart (it abstains on 1 of 32 answerable items);
     GRPO: abstentions in its samples 44 % (step 1) → 100 % (step 5), GRPO 0 (0 %, 100 %), +9.4
     [−10.9, +29.7]; with rollout temperature 0.5, 25 % → 97 % by step 5 (stopped).
 16. 128 + 16 (144, ratio 0.889), 36 steps: SFT −18.8 (81.2 %, 0 %); GRPO: correct samples 38 %
     (step 1) → 6 % (step 6), then abstentions 19 % → 97 % (steps 6-10): 0 (0 %, 100 %), +18.8
     [−6.2, +43.8]; at lr 3e-6: −6.2 (0 %, 87.5 %), +12.5 [−10.9, +35.9].
 17. run 16's SFT recipe on world 4 (SFT world 1004): SFT −34.4 (65.6 %, 0 %) → GRPO −15.6 (84.4 %,
     0 %), +18.8 [−3.1, +37.5]: accuracy up 19 points, never an abstention sampled.
 18. run 15's SFT, 16 prompts × G=4 a step (64 completions) at lr 3e-6: abstentions 41 % (step 1) →
     97 % (step 12), GRPO 0 (0 %, 100 %), +9.4 [−10.9, +29.7].
 19. run 15's SFT with a KL term to it (loss.kl_coef=0.2, k3): the path of run 15 (abstentions 44 %
     → 97 % by step 4; per-token KL 0.02, small beside advantages of ±1; stopped).
 20. run 15's SFT model, SFT again over the same 256 rows (a second pass, lr 2e-5 cosine, 64 steps,
     8 min 42 s on the idle CPU): SFT +4.7 (56.2 %, 96.9 %); GRPO (then this file's stage: 12
     steps of 4 × G=8, ~25 s a step idle) +31.2 (78.1 %, 100 %), GRPO − SFT +26.6 [+6.2, +46.9],
     reward +0.27 [+0.06, +0.47] — the first run in which GRPO raised accuracy on answerable items AND kept abstaining on the
     unanswerable ones (2 abstentions on 32 answerable items). Its samples at step 1: 34 % correct
     (~69 % of the answerable half), 19 % abstentions. This SFT is the landed one (SFT_PASSES).
 21. run 20's recipe on world 4 (both SFT passes on world 1004): SFT +7.8 (56.2 %, 96.9 %) → GRPO
     +7.8 (50 %, 100 %), +0 [−17.2, +15.6]: the discriminating SFT reproduced; GRPO gained nothing
     (its samples also dipped into abstaining, 97 % at step 7, and came back to 41-66 %).
Then GRPO with 8 prompts × G=8 a step (64 completions; this file's stage from here), lr 1e-5, 12
steps:
 22. from run 20's SFT model (dev world 1): GRPO +37.5 (87.5 %, 96.9 %), GRPO − SFT +32.8 [+14.1,
     +51.6]; from run 21's (world 4): +25.0 (81.2 %, 87.5 %), +17.2 [+0, +35.9] — accuracy up 25-31
     points on both worlds, abstention kept (97 → 97 % and 97 → 88 %). Samples in the last steps:
     ~40-47 % abstentions, 36-47 % correct (of 50 % answerable).
 23. a cheaper SFT (`launch/demo.py --dev` and `--world=4`): one run of 2 epochs over 192 rows (96
     steps, one cosine from 5e-5) instead of two runs over 256: SFT −20.3 (71.9 %, 15.6 %) on world
     1 and −12.5 (21.9 %, 84.4 %) on world 4 — a world-dependent abstention bias again — and GRPO's
     samples went to abstaining on both (correct 23 → 5 % and 22 → 3 % by step 5; stopped there).
Cheaper SFT to fit the budget (runs 24-26, both dev worlds, `launch/demo.py --dev` and `--world=4`
in parallel with SFT_EXAMPLES and GRPO_STEPS edited):
 24. two passes over 128 rows (32 + 32 steps), GRPO 12 steps: SFT −1.6 (3.1 %, 100 %) on world 1,
     +1.6 (34.4 %, 78.1 %) on world 4; GRPO's samples went to abstaining on both (62 → 100 % by
     step 6 and 64 → 92 % by step 5; stopped).
 25. two passes over 192 rows (48 + 48 steps), GRPO 9 steps: SFT +17.2 (46.9 %, 96.9 %) on world 1,
     −12.5 (37.5 %, 81.2 %) on world 4; GRPO 0 (0 %, 100 %) on both — the refusal corner; GRPO −
     SFT −17.2 [−29.7, −4.7] and +12.5 [−4.7, +29.7]. Samples at step 1: correct 17 % and 25 %,
     wrong 27 % and 27 % of all 64 — on answerable prompts wrong about as often as right, where the
     ternary reward makes abstaining the better policy.
 26. run 25's SFT models, GRPO at rollout temperature 0.7 (is the sampled-vs-greedy gap the cause?):
     samples at step 1 no better (correct 17 % and 20 %, wrong 23 % and 30 %); world 1 abstained on
     95 % by step 3 (stopped). The cause is SFT's accuracy, not the temperature.
Cheaper steps instead of fewer (run 27 on the idle machine, `SFTTrainer.train(max_steps=6)` on
dev world 1's rows; GRPO steps 2-4 from world 5's SFT model): an SFT step of 4 rows took 8.1 s in
float32, 6.9 s with 3 passages a row instead of 5, 6.6 s with bfloat16 activations (float32 weights
and accumulation; the same losses to 2 digits), 6.2 s with both; a GRPO step 40-47 s in float32 and
34-35 s in bfloat16, with the same samples to 2 digits (abstentions 47, 53, 72, 86 % against 44,
58, 69, 83 %).
 27. SFT rows over 3 passages (dev worlds 1 and 4 in parallel; float32 in fact: launch/demo.py then
     loaded its one model without the configs' dtypes, since fixed): SFT +9.4
     (56.2 %, 100 %) and −1.6 (40.6 %, 100 %) — reading five passages worse after training on
     three; world 1's GRPO samples were wrong more often than right at step 1 (correct 27 %, wrong
     41 %) and abstained on 97 % by step 3 (stopped); world 4's hovered at 45-67 % abstentions for
     5 steps (stopped, to run 28).
 28. bfloat16 activations in every stage, SFT rows over 5 passages (`launch/demo.py --world=1`,
     alone): 24.2 min (start evaluation 37 s, SFT 903 s, its evaluation 30 s, GRPO 459 s, its
     evaluation 21 s) — within the budget; but SFT −18.8 (71.9 %, 15.6 %) where float32 gave +4.7
     (56.2 %, 96.9 %, run 20), its samples were wrong more often than right (correct 27 %, wrong
     36 % at step 1), and GRPO abstained on everything: 0.0 (0 %, 100 %), GRPO − SFT +18.8 [−3.1,
     +42.2] — a gain by refusing. So the demo stays in float32 (COMPUTE_DTYPE), over the budget
     until run 35.
Then the step metrics split by the prompts' answerability (rl/collect.answerability_metrics: each
step's reward and its components on its answerable and on its unanswerable prompts) showed what the
swings of runs 15-28 had partly been: 8 prompts drawn at random from a half-answerable set held 1 to
6 answerable ones a step (run 29, world 1: 6, 5, 2, 1, 5, 6, 3, 4, 6, 4, 3, 5), and the step's
abstention rate followed that count (25 → 88 → 27 %), not the policy — while a step of 7
unanswerable prompts and 1 answerable one pushes towards abstaining everywhere. Since run 30 every
step holds both kinds in the data's proportion (data.stratify="answerable"): 4 + 4, 5 + 3 since
run 40.
 29. run 22's settings with 3 passages in EVERY context (SFT rows, GRPO prompts and held-out
     questions; run 27 trained on 3 and evaluated on 5), dev worlds 1 and 4 in parallel: SFT
     (78.1 %, 100 %) and (68.8 %, 100 %); GRPO − SFT +0 [−12.5, +12.5] and +15.6 [−3.1, +34.4];
     GRPO again from these SFT models at lr 3e-6: +6.25 [−6.25, +18.75] and +15.6 [+0, +31.25].
     SFT already abstained on every unanswerable item: GRPO's only room was the answerable half,
     and 64 questions resolve ±12-19 points.
 30. a world of 24 countries instead of 12 (room for 128 held-out questions: intervals ~1/√2 as
     wide), 128 held-out questions, stratified GRPO steps, ONE SFT pass over 256 rows three
     quarters answerable: SFT −23.4 (76.6 %, 0 %) on world 1, +4.7 (85.9 %, 35.9 %) on world 4;
     GRPO's samples at step 1 were right on 31-34 % of answerable prompts and wrong on 44-53 %, and
     abstained on 97 % of them by step 7 (stopped). One pass's sampled accuracy (at T = 1 on the
     held-out questions 67 % against 77-86 % greedy) is the problem of runs 15-19 again.
 31. run 30 with both SFT passes (this file, but SFT micro-batches of 2): world 1 SFT +21.1
     (78.1 %, 85.9 %) → GRPO +41.4 (89.1 %, 98.4 %), GRPO − SFT +20.3 [+9.4, +32.8], reward +0.20
     [+0.09, +0.33]; world 4 SFT +27.3 (81.2 %, 90.6 %) → GRPO +33.6 (79.7 %, 100 %), +6.25 [−4.7,
     +17.2]. No corner on either: the samples' abstentions on answerable prompts rose at steps 2-4
     (to 88 % and 69 %) and fell back to 6-16 % by step 12, the unanswerable half of every step
     pulling the other way; right on 72-78 % of answerable prompts in the last step (38 % and 59 %
     at step 1). World 4's gain is abstention only (greedy accuracy 81 → 80 %).
 32. run 31's SFT models, GRPO at lr 2e-5: world 4's samples abstained on every prompt from step 2
     (every group without variance at steps 5-6; stopped at step 7); world 1's swung as at 1e-5
     (abstention on answerable prompts 56-88 % at steps 2-4; stopped at step 6). lr stays 1e-5.
 33. run 31 with SFT micro-batches of 4 (for time), `launch/demo.py --dev` alone: 26.3 min (start
     evaluation 89 s with the model load, SFT 854 s, its evaluation 69 s, GRPO 501 s, its
     evaluation 66 s) and, to the digit, run 31's world-1 table (+20.3 [+9.4, +32.8]): the runs are
     deterministic on this CPU, and the micro-batch split did not move SFT's greedy answers.
 34. run 33 with 192 SFT rows instead of 256 (to fit 25 minutes: ~3.5 min less), dev worlds 1 and
     4 in parallel: SFT −9.4 (81.2 %, 18.8 %) and −19.5 (79.7 %, 1.6 %) — 48 abstention rows
     instead of 64 taught little abstaining; GRPO's samples on world 4 abstained on 91-100 % of
     all prompts from step 5 (every group without variance at step 10; stopped), on world 1 they
     swung between 25 and 78 % abstention on answerable prompts (stopped at step 9). 256 rows stay.
 35. run 33 with SFT's shared prefix (every SFT row begins with the same 236 tokens of chat template
     and TruthRL instructions, of 330-377 prompt tokens; they now run once per micro-batch and the
     rows' other tokens are packed after them, sft/trainer.pack_micro_batches: the same loss from
     fewer tokens), `launch/demo.py --dev` alone: 22.8 min (start evaluation 86 s, SFT 641 s
     instead of 854, its evaluation 73 s, GRPO 500 s, its evaluation 69 s; peak 7.7 GB) and run
     33's table to the digit (SFT +21.1 (78.1 %, 85.9 %) → GRPO +41.4 (89.1 %, 98.4 %), GRPO − SFT
     +20.3 [+9.4, +32.8]): the budget met with the settings unchanged.
Then, after fresh worlds 9 and 10 (the reported-world paragraph below: +9.4 n.s. and the refusal
corner), GRPO alone from their saved SFT models (worlds 9 and 10 are dev worlds from here;
/tmp/exp.sh-style runs of launch/train.py then launch/evaluate.py, two in parallel):
 36. rollout temperature 0.7 (does the gap between sampled and greedy accuracy, 50 % against 84 %
     on world 10, drive it?): world 10's samples abstained on 97 % of answerable prompts by step 3;
     world 9's swung 12 → 56 → 75 → 53 → 16 → 25 → 0 % abstentions on answerable prompts in
     steps 1-7, though at step 1 they were 84 % right and 3 % wrong (stopped at steps 9 and 8).
 37. lr 5e-6: the same drift, slower — abstentions on answerable prompts 19 → 81 % (world 10) and
     22 → 75 % (world 9) by step 8 (stopped).
     Why a step of 4 + 4 pushes towards abstaining even where answers are mostly right: on the
     choice between answering and abstaining (the think block's first words, shared by all of a
     group's answers), a group's net push towards answering is the sum of its answers'
     advantages, which is minus that of its abstentions: n_abstain × mean / std. On an
     unanswerable prompt it always points to abstaining (mean < 0 while any sample answers); on an
     answerable one it points to answering only while right answers outnumber wrong ones, and it
     is small while few abstentions are sampled. World 9 at step 1: ~2.5 per answerable group
     against ~3.6 per unanswerable one. The 135M model's choice barely depends on the passages
     yet, so the net moves it on every prompt, and the policy swings in and out of abstaining;
     where step 12 falls decides the table.
 38. 6 answerable + 2 unanswerable prompts a step (data answerable_ratio 0.75): world 10 +12.5
     [+0, +25] (accuracy 84.4 → 82.8 %, abstention 48.4 → 73.4 %); world 9 −12.5 [−21.9, −3.1]
     (71.9 → 84.4 %, 87.5 → 50 %): now leaning to answering.
 39. 5 + 3 (answerable_ratio 0.625): world 10 +18.8 [+7.0, +30.5] (84.4 → 73.4 %, 48.4 → 95.3 %);
     world 9 −3.1 [−14.8, +8.6] (71.9 → 93.8 %, 87.5 → 48.4 %).
 40. 5 + 3 from world 8's and dev world 1's SFT models (run 35's): world 8 +21.1 [+10.2, +32.8]
     (81.2 → 93.8 %, 68.8 → 85.9 %; with 4 + 4 +14.1 by abstaining alone, accuracy 81 → 64 %),
     world 1 +18.0 [+7.0, +30.5] (78.1 → 90.6 %, 85.9 → 96.9 %): accuracy AND abstention up.
     Its samples on answerable prompts: 82-93 % right and 0-3 % abstentions in steps 10-12 on both.
     5 + 3 is above zero on 3 of these 4 worlds (4 + 4: 2 of 4), and its gains are not refusals.
So the landed settings: two SFT passes (SFT_PASSES) over 256 rows of world seed + 1000, three
quarters answerable; PASSAGES = 3 in every context; 12 GRPO steps of 8 × G=8 at lr 1e-5, each step
5 answerable and 3 unanswerable prompts (runs 36-40); 128 held-out questions of a 24-country world,
half of them answerable. Fewer SFT
rows or one pass leave the model wrong as often as right on answerable questions when it samples,
and GRPO then learns to abstain everywhere (runs 23-26, 30); so did bfloat16 (run 28): where SFT
lands is sensitive even to the arithmetic.
Why GRPO still finds the refusal corner when SFT reads well: on an answerable prompt the advantage of
an abstention is (0 − mean)/std = (p_wrong − p_correct)/std, positive whenever the group's wrong
answers outnumber its right ones, and SFT's sampled accuracy at T = 1 is well below its greedy one
(run 15: 19 % of answerable samples correct at step 1 against 62.5 % greedy). With 4 prompts a step
a few hard questions teach abstaining everywhere within 12 steps at these rates; 16 prompts a step
(run 18) and a KL term (run 19) did not change that.
Before run 22, GRPO in this budget moved the 135M model to one of two corners, answering everything
(more accurately: runs 2, 3, 5, 9, 17) or abstaining on everything (runs 1, 6, 10, 11, 15, 16, 18,
19), depending on where SFT left it (its sampled accuracy against the abstention it happened to
sample). Twice the prompts a step (8 × G=8, run 22) from two-pass SFT steadied the policy: it raised
accuracy on answerable items and kept abstaining on both dev worlds (on world 4 with an interval
whose low end is 0); from run 29 on, the unbalanced prompt mix was seen to be a second push towards
a corner, and stratified steps (run 31) kept both dev worlds off them. The table's accuracy and
abstention columns show whether a run reached a corner.

Reported worlds: 0 (runs 1-2's settings, run 3), 2 (run 6), 3 (runs 9-10's settings, README until
runs 20-22) were each reported once and are dev worlds since. With runs 20-22's settings: world 5
(SFT +9.4 (78.1 %, 62.5 %) → GRPO +32.8 (78.1 %, 100 %), GRPO − SFT +23.4 [+3.1, +43.8], reward
+0.23 [+0.03, +0.44]); world 6 from a clean clone (SFT +26.6 (78.1 %, 87.5 %) → GRPO +18.8 (84.4 %,
68.8 %), GRPO − SFT −7.8 [−25, +9.4]: GRPO traded abstention for accuracy); world 7 from a clean
clone (SFT 0.0 (31.2 %, 90.6 %) → GRPO 0.0 (6.2 %, 96.9 %), GRPO − SFT +0 [−15.6, +14.1]: SFT read
poorly and GRPO drifted to abstaining, its samples swinging between 13 and 89 % abstentions) — the
gain replicated on one fresh world of three (64 held-out questions each). With runs 31-33's
settings (this file until 81b49a0): world 8, then WORLD_SEED, from clean clones: at 1ff93f3 SFT
+15.6 (81.2 %, 68.8 %) → GRPO +31.2 (64.1 %, 100 %), GRPO − SFT +15.6 [+3.9, +28.1], reward +0.156
[+0.039, +0.281]; at 4475637 (SFT's shared prefix, run 35: the same SFT model to the digit, GRPO's
path different in the last bits) GRPO +29.7 (64.1 %, 100 %), GRPO − SFT +14.1 [+2.3, +25.8], reward
+0.14 [+0.023, +0.258] — both by abstaining: hallucination 25 % → 0.8 % and 2.3 % of the questions,
and abstentions on 22 and 20 answerable items (17 and 15 that SFT had right, all or nearly all
one-hop questions). Then worlds 9 and 10, once each, with this file at b721867 (`launch/demo.py
--world=9` and `--world=10`, in parallel): world 9 SFT +21.9 (71.9 %, 87.5 %) → GRPO +31.2 (76.6 %,
93.8 %), GRPO − SFT +9.4 [−1.6, +20.3] — both halves better, the interval not above zero; its
samples abstained on 72-91 % of answerable prompts at steps 3-8 and came back to 9 % at step
12. World 10 SFT +9.4 (84.4 %, 48.4 %) → GRPO +1.6 (12.5 %, 92.2 %), −7.8 [−21.9, +6.25] — the
refusal corner: SFT abstained on only half the unanswerable items, its samples were right on 50 %
of answerable prompts at step 1, and they abstained on 62-88 % of them from step 2 on. So with these
settings the gain holds on 1 fresh world of 3 with its interval above zero (8), and GRPO still
reaches the refusal corner where SFT lands weakly. Worlds 8, 9 and 10 then served runs 36-40 (dev
worlds since), which landed 5 + 3 prompts a step; then world 11, once, from a clean clone at
81b49a0 (README): SFT +11.7 (89.1 %, 43.8 %) → GRPO +24.2 (90.6 %, 67.2 %), GRPO − SFT +12.5 [+3.1,
+21.9], reward +0.125 [+0.031, +0.219] — the reported world (WORLD_SEED); and world 12, once
(`launch/demo.py --world=12` at bfa3cf7): SFT +10.9 (75.0 %, 70.3 %) → GRPO +33.6 (84.4 %, 98.4 %),
+22.7 [+9.4, +36.7], reward +0.23 [+0.09, +0.37]. The next fresh world is 13.

Data and the held-out rule. GRPO trains on TRAIN_QUESTIONS questions of the synthetic world (seed
WORLD_SEED, NUM_COUNTRIES countries, ANSWERABLE_RATIO answerable), SFT on SFT_EXAMPLES questions of
world WORLD_SEED + SFT_WORLD_OFFSET; every evaluation asks EVAL_QUESTIONS other questions of the
GRPO world, half of them answerable, that neither stage saw (grounding_jax.data.splits.held_out), every context PASSAGES passages.

Settings that exist only to fit the CPU budget (not the paper's; TruthRL trains Llama-3.1-8B with lr
1e-6, G=8, 8k tokens, β=0.001, on its data's own mix of questions): SFT learning rate, rows and
passes; GRPO's learning rate, steps, prompts per step and their 5 + 3 answerable mix (12 steps are
too few for the 135M model to tell the kinds apart before a half-and-half mix tips it to
abstaining: runs 36-40), 96 new tokens and no KL term; 128 held-out questions; 3 passages a context.
"""

import ml_collections

from grounding_jax.rl import config as rl_config
from grounding_jax.rl import presets
from grounding_jax.sft import trainer as sft_trainer

WORLD_SEED = 11       # the reported world (0-10 were looked at while settings changed: module doc)
DEV_SEED = 1          # the world the settings were chosen on
TRAIN_QUESTIONS = 64  # GRPO prompts (one draw of the world; the held-out questions are others)
SFT_WORLD_OFFSET = 1000  # SFT's rows: world seed + 1000 (none of the evaluated world's facts)
SFT_EXAMPLES = 256    # SFT rows: answerable ones and unrelated passages with `\boxed{I don't know}`
SFT_ANSWERABLE_RATIO = 0.75  # of the SFT rows (0.5 abstained on every unanswerable item: run 29)
NUM_COUNTRIES = 24    # world size (people 2x, companies 1x): room for 128 held-out questions
PASSAGES = 3          # passages in every context (SFT rows, GRPO prompts, held-out questions): a
                      # ~354-token prompt; 5 cost an SFT step 8.1 s instead of 6.9 s (run 27)
COMPUTE_DTYPE = "float32"  # "bfloat16" ran the demo in 24.2 min instead of ~30.5, but its SFT
                           # landed elsewhere and GRPO then abstained on everything (run 28)
SFT_PASSES = ("sft", "sft2")  # two SFT runs over the rows, the second from the first's model
                              # (module doc: one pass, or one run of 2 epochs, left GRPO a corner)
ANSWERABLE_RATIO = 0.625  # of the GRPO prompts: 5 + 3 a step (4 + 4 leaned to abstaining: runs 36-40)
UNANSWERABLE = "unrelated"  # unanswerable contexts name none of the question's entities (module doc)
EVAL_QUESTIONS = 128  # CPU budget: ~42 s an evaluation on the idle CPU; intervals ±10-12 points
MAX_NEW_TOKENS = 96   # a two-hop gold completion (think + box) is ~75 SmolLM2 tokens
MAX_PROMPT_TOKENS = 1024  # TruthRL's prompt over 3 synthetic passages: 330-377 tokens
GRPO_STEPS = 12      # CPU budget (8 prompts × G=8: ~38 s a step on the idle 2 cores)
PRESETS = ("sft", "sft2", "dev", "runlocal")


def _data(seed: int) -> dict:
  # stratify: every GRPO step holds 5 answerable and 3 unanswerable prompts; drawn at random, a step
  # held 1 to 6 answerable ones and its abstention followed the mix (module doc, runs 29, 36-40).
  return dict(kind="synthetic", path="", num_examples=TRAIN_QUESTIONS, seed=seed,
              answerable_ratio=ANSWERABLE_RATIO, unanswerable=UNANSWERABLE, num_passages=PASSAGES,
              num_countries=NUM_COUNTRIES, shuffle=True, stratify="answerable")


def sft_config(seed: int, second: bool = False) -> ml_collections.ConfigDict:
  """An SFT pass over SFT_EXAMPLES gold completions of ANOTHER world, both kinds (`second`: the
  second pass, from the first's model at a lower rate)."""
  c = sft_trainer.default_config()
  c.workdir = "/tmp/grounding_jax_demo/sft" if second else "/tmp/grounding_jax_demo/sft1"
  c.model.path = "/tmp/grounding_jax_demo/sft1/hf" if second else presets.SMOLLM2
  c.model.remat = True              # else the backward keeps 30 layers' activations: GBs
  c.model.compute_dtype = COMPUTE_DTYPE
  # Another world's questions (no entity, fact or question of the evaluated world), a quarter of
  # them over unrelated passages with the target `\boxed{I don't know}`: SFT teaches the format,
  # reading and when to abstain; GRPO then sharpens both (module doc, runs 12-21, 29-31).
  c.data.update(dict(kind="recipe", recipe="truthrl", source="synthetic", template="default",
                     target="default", num_examples=SFT_EXAMPLES, seed=seed + SFT_WORLD_OFFSET,
                     answerable_ratio=SFT_ANSWERABLE_RATIO, unanswerable=UNANSWERABLE,
                     answerable_only=False, num_passages=PASSAGES, num_countries=NUM_COUNTRIES))
  c.data.max_prompt_tokens = MAX_PROMPT_TOKENS
  c.data.max_completion_tokens = 128
  # CPU budget: SFT_EXAMPLES / 4 = 64 steps a pass; the 4 rows in one micro-batch (remat keeps it
  # small): 6.4-6.6 s a step against 6.7-7.2 s as two micro-batches of 2, and 4.5-4.8 s since the
  # 236 tokens of chat template and instructions every row begins with run once a micro-batch
  # (sft/trainer.pack_micro_batches; the same greedy SFT model on dev world 1, run 35).
  c.batch_size, c.micro_batch_size = 4, 4
  c.num_epochs = 1
  # CPU budget: high rates for a few hundred rows (TruthRL's SFT baseline uses 5e-6); each pass its
  # own cosine (run 20; one cosine over 2 epochs at 5e-5, run 23, did not do the same).
  c.optimizer.update(dict(learning_rate=2e-5 if second else 5e-5, schedule="cosine",
                          warmup_ratio=0.1, max_grad_norm=1.0))
  c.checkpoint.every_steps = 64
  return c


def grpo_config(seed: int) -> ml_collections.ConfigDict:
  """GRPO with TruthRL's ternary reward (exact-match verifier) from the SFT model."""
  c = rl_config.default_config()
  c.workdir = "/tmp/grounding_jax_demo/grpo"
  c.reward.functions = [presets.reward_fn("truthrl", judge=dict(kind="exact_match"))]
  c.stages = [rl_config.stage("demo", num_steps=GRPO_STEPS, recipe="truthrl", data=_data(seed))]
  presets.runlocal(c, steps=GRPO_STEPS, max_new_tokens=MAX_NEW_TOKENS)
  c.model.compute_dtype = COMPUTE_DTYPE  # sampling, updates and every evaluation (launch/evaluate.py)
  # Pinned here (presets.runlocal's sizes change with the recipes' shrinks): the sizes measured in
  # this file's docstring. CPU budget: 8 prompts × G=8, one group per micro-batch (with 4 prompts a
  # step, runs 20-21, a few hard questions a step swung the policy into and out of abstaining).
  c.rollout.update(dict(prompts_per_step=8, group_size=8))
  c.update_loop.micro_batch_size = 8
  c.stages[0].data.update(_data(seed))  # the demo's own draw (seed, answerable share)
  c.rollout.max_prompt_tokens = MAX_PROMPT_TOKENS
  # One update shape per sampler prompt bucket (bucket + max_new_tokens; ~420-token prompts span two
  # or three of sampling.bucket_length's widths), instead of one per packed width in multiples of 32.
  # In the reported run steps 2, 5 and 9 compiled 16 s, 6 s and 6 s more (step 1: 21 s), most likely
  # new prompt buckets (not traced). Unrolled layers once took 18.5 min to compile step 1.
  c.update_loop.length_multiple = 0
  c.advantage.std_ddof = 1
  c.loss.kl_coef = 0.0                  # TruthRL's β = 0.001 needs a reference copy; CPU budget
  # CPU budget: 12 steps of 32 completions need a far higher rate than TruthRL's 1e-6 on an 8B model.
  c.optimizer.update(dict(learning_rate=1e-5, schedule="constant", warmup_ratio=0.0))
  c.evals.update(dict(num_examples=EVAL_QUESTIONS, batch_size=32, every_steps=0))
  c.evals.data.update(dict(kind="synthetic", path="", seed=seed, answerable_ratio=0.5,
                           unanswerable=UNANSWERABLE, num_passages=PASSAGES))
  c.evals.decoding.max_new_tokens = MAX_NEW_TOKENS  # greedy (TruthRL's eval decoding), shorter cap
  return c


def get_config(arg=None):
  parts = [p for p in (arg or "").split(",") if p]
  worlds = [p for p in parts if p.startswith("world=")]
  unknown = [p for p in parts if p not in PRESETS and p not in worlds]
  if unknown:
    raise ValueError(f"configs/demo.py:{arg}: unknown preset(s) {unknown}; expected a comma-separated "
                     f"subset of {PRESETS} and at most one world=N (N an integer seed)")
  if len(worlds) + ("dev" in parts) > 1:
    raise ValueError(f"configs/demo.py:{arg}: name one world: dev, or world=N, not both")
  seed = DEV_SEED if "dev" in parts else WORLD_SEED
  if worlds:
    value = worlds[0].partition("=")[2]
    if not value.isdigit():
      raise ValueError(f"configs/demo.py:{arg}: world={value!r} must be a non-negative integer seed")
    seed = int(value)
  if "sft" in parts and "sft2" in parts:
    raise ValueError(f"configs/demo.py:{arg}: name one SFT pass: sft or sft2, not both")
  if "sft" in parts or "sft2" in parts:
    return sft_config(seed, second="sft2" in parts)
  return grpo_config(seed)
