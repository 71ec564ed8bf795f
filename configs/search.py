r"""Search-R1 (arXiv:2503.09516): the policy searches inside its rollout, then answers; EM reward.

  python launch/train.py --config=configs/search.py --config.model.path=/ckpt/Qwen2.5-3B \
      --config.stages[0].data.path=/data/search/train.jsonl --config.search.url=http://host:8000/retrieve \
      --workdir=/runs/search
  python launch/train.py --config=configs/search.py:runlocal --workdir=/tmp/gj_search      # CPU
  python launch/train.py --config=configs/search.py:runlocal,grounded --workdir=/tmp/gj_search_g
  python launch/learning_check.py --config=configs/search.py:runlocal --sft_steps=16 --workdir=/tmp/gj_lc_search
  python launch/learning_check.py --config=configs/search.py:runlocal --sft_steps=32 --sft_world_offset=1000 \
      --sft_target=default:0.25,direct:0.75 --workdir=/tmp/gj_lc_search_mix   # a warm-up that seldom searches
  python launch/learning_check.py --config=configs/search.py:runlocal,grounded,contrast --sft_steps=64 \
      --sft_world_offset=1000 --sft_answerable_ratio=0.625 --best_every=2 --workdir=/tmp/gj_lc_search_gc

`:grounded` trains the grounded variant (recipe search_grounded: answers must be supported by the
retrieved passages, `I don't know` pays where nothing retrieved supports one). `:contrast` adds
evidence-contrast groups (data.evidence_contrast="gold_removed"): each answerable question's G
samples split between searching the whole corpus and searching it without that question's gold
passages (then labelled unanswerable), under one advantage baseline; with `:runlocal,grounded` it
also prices an abstention where the search found the answer at −1 and halves the rate (1e-5), the
settings its learning check learned with. docs/recipes/search.md has the format, the reward table
and the commands.

The paper's retriever is E5 over the 2018 Wikipedia dump behind the authors' retrieval server
(`search_r1/search/retrieval_server.py`); serve it (or any index speaking its protocol) and give
--config.search.url. `:runlocal` searches the synthetic world in-process with BM25, without the
facts the world withholds (data.withheld_share), so its unanswerable questions find nothing.

Paper / authors' GRPO scripts (arXiv:2503.09516 §4.1, App. B): 512 prompts per step, G = 5, lr 1e-6
with a warm-up over 28.5 % of the steps, β = 0.001 (k3, clamped), ε = 0.2, 500 new tokens per
turn, top-3 passages, 1005 steps, NQ + HotpotQA training data.
"""

from grounding_jax.rl import config as rl_config
from grounding_jax.rl.config import presets

MAX_TURNS = 4       # the paper's action budget
RUNLOCAL_TURNS = 3  # two hops and one retry fit in a CPU run
# recipes/search/reward.py GroundedSearchReward's defaults (its docstring's table).
GROUNDED_REWARD = dict(abstain_reward=1.0, unjustified_abstain_reward=0.0, unsupported_reward=-1.0)


def _set_max_turns(c, turns):
  # rollout.max_turns comes with the multi-turn sampler (issue 38 part 1); until then a config
  # without it still loads, and runs single-turn.
  if "max_turns" in c.rollout:
    c.rollout.max_turns = turns


def get_config(arg=None):
  args = set(arg.split(",")) if arg else set()
  unknown = args - {"runlocal", "grounded", "contrast"}
  if unknown:
    raise ValueError(f"configs/search.py:{arg}: unknown preset(s) {sorted(unknown)}; expected "
                     "any of 'runlocal', 'grounded', 'contrast' (e.g. 'runlocal,grounded,contrast')")
  recipe = "search_grounded" if "grounded" in args else "search"
  c = rl_config.default_config()
  c.model.path = ""
  c.model.compute_dtype = "bfloat16"
  c.model.remat = True
  c.rollout.update(dict(prompts_per_step=512, group_size=5, max_new_tokens=500, temperature=1.0,
                        top_p=1.0, max_prompt_tokens=4096))
  _set_max_turns(c, MAX_TURNS)
  c.search.update(dict(retriever="http", corpus="", url="", top_k=3, timeout_s=30.0, retries=3,
                       on_error="empty"))
  # The grounded reward's values, spelled out so a run can set them from the command line
  # (--config.reward.functions[0].options.unjustified_abstain_reward=-0.5: a price on abstaining
  # where the retrieved passages hold the answer, as the demo's against the refusal corner).
  options = GROUNDED_REWARD if recipe == "search_grounded" else {}
  c.reward.functions = [presets.reward_fn(recipe, **options)]
  c.advantage.update(dict(scale="group", std_ddof=1, eps=1e-6))
  c.loss.update(dict(clip_eps_low=0.2, clip_eps_high=0.2, kl_coef=0.001, kl_estimator="k3",
                     kl_clamp=10.0, aggregation="token_mean"))
  c.update_loop.update(dict(num_iterations=1, num_minibatches=2, micro_batch_size=8))
  c.optimizer.update(dict(learning_rate=1e-6, schedule="constant", warmup_ratio=0.285,
                          weight_decay=0.01, max_grad_norm=1.0))
  c.stages = [rl_config.stage("search", num_steps=1005, recipe=recipe)]
  c.stages[0].data.update(dict(kind="jsonl"))
  c.checkpoint.every_steps = 100
  c.evals.update(dict(every_steps=0, num_examples=0))
  c.evals.data.update(dict(kind="jsonl", path=""))
  if "runlocal" in args:
    # Gold traces (SmolLM2 tokens, the inserted results included, tokenised at their edges as SFT
    # does): 182 on average, 343 at most (two hops, two result blocks).
    presets.runlocal(c, max_new_tokens=384)
    _set_max_turns(c, RUNLOCAL_TURNS)
    c.search.update(dict(retriever="bm25", corpus="synthetic", url=""))
    # Half the world's facts are left out of the corpus: unanswerable questions need one of them.
    # A world twice the default size: with half its facts withheld, the default 12 countries leave
    # too few answerable questions beside the 64 training items for a 32-question held-out split.
    c.stages[0].data.update(dict(withheld_share=0.5, answerable_ratio=0.5, num_countries=24))
  if "contrast" in args:
    # Each answerable question's G samples: G/2 search the corpus, G/2 search it without the
    # question's gold passages (labelled unanswerable there); one advantage baseline. The data's
    # unanswerable questions leave the stream (each gold_removed half plays their part).
    c.stages[0].data.evidence_contrast = "gold_removed"
    if c.rollout.group_size % 2:  # [DECISION] Search-R1's G = 5 does not halve: 6 (3 + 3)
      c.rollout.group_size += 1
    if "runlocal" in args and recipe == "search_grounded":
      # [DECISION] The settings with which the grounded check kept off both corners on GRPO seeds
      # 0, 1 and 2 and gained on each (docs/recipes/search.md, Results): an abstention where the
      # search found the answer costs what a wrong answer does (otherwise abstaining on a gold-kept
      # row is safer than trying), and half :runlocal's rate (at 2e-5 seed 1 fell into the refusal
      # corner).
      c.reward.functions[0].options.unjustified_abstain_reward = -1.0
      c.optimizer.learning_rate = 1e-5
  return c
