"""The sections of an experiment file, as pydantic models (pydantic is used at this boundary only).

The sections whose keys depend on the algorithm (``algorithm.params``, ``algorithm.network``,
``algorithm.exploration`` and ``trainer``) are plain mappings here; :mod:`tshtrain.config.resolve`
checks them against the algorithm's params class and the trainer's params class.
"""

from __future__ import annotations

import importlib.util
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tshtrain.algorithm.blocks.noisy import NOISY_SIGMA0
from tshtrain.config.defaults import DEFAULT_DEVICE
from tshtrain.config.env_kinds import ENV_KINDS, EnvInterface, env_kind, kinds_where, multi_agent_kinds, takes
from tshtrain.config.sections import RayEnvConfig, Section, WrapperConfig
from tshtrain.devices import DEVICE_FORMS, check_device_form
from tshtrain.errors import ConfigurationError

ENV_TYPES = tuple(ENV_KINDS)
"""what ``env.type`` (alias ``env.kind``) names: the kinds of :data:`tshtrain.config.env_kinds.ENV_KINDS`"""


def _env_kind_name(value: Any) -> Any:
    """``env.type``: a name of the registry of env kinds (a new entry is a name files can use)."""
    if isinstance(value, str) and value in ENV_KINDS:
        return value
    names = [repr(name) for name in ENV_KINDS]
    expected = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


EnvType = Annotated[str, BeforeValidator(_env_kind_name)]
"""an env kind's name"""

MAX_SUB_ENVS_PER_PROCESS = 256
"""sub-envs of ``env.vector: async`` at most: one process each"""
MAX_SUB_ENVS_PER_OBJECT = 1024
"""sub-envs of the kinds that are not batched (Gymnasium ``sync`` or ``ray``, PettingZoo) at most: one
Python env object each"""
MAX_SUB_ENVS_BATCHED = 1 << 20
"""sub-envs of batched simulators (the kinds with ``batched``: ``envpool``, ``vmas``,
``torch_cartpole``) at most"""
MAX_SEED = 1 << 63
"""seeds are in [0, 2**63): what numpy and torch accept, with room for the derived seeds"""


def _batched_kinds() -> str:
    """The batched kinds on the Gymnasium path, the hint of too many sub-envs: ``env.type envpool``."""
    return f"env.type {kinds_where(lambda kind: kind.batched and kind.interface is EnvInterface.GYMNASIUM)}"


Activation = Literal["tanh", "fast_tanh", "relu", "elu", "gelu", "silu"]
"""hidden activations by name (``fast_tanh``: :class:`tshtrain.algorithm.FastTanh`, for large CPU batches)"""


class EnvConfig(Section):
    """The environments: training and test vector envs of the same Gymnasium id."""

    type: EnvType = "gymnasium"
    """the env kind: what builds the envs, one of the kinds of
    :data:`tshtrain.config.env_kinds.ENV_KINDS` (``tshtrain list`` names them; each entry's ``summary``
    says what it builds from ``id`` and ``kwargs``): ``gymnasium``, ``envpool``, ``vmas``,
    ``torch_cartpole``, ``pettingzoo``. Torch-native kinds (``vmas``, ``torch_cartpole``) keep their data
    on ``env.device``"""
    kind: EnvType | None = Field(default=None, exclude=True)
    """an alias of ``type`` (files may say ``kind: pettingzoo``); giving both with different values is an
    error. Always None once resolved and never written back: the resolved experiment states ``type``"""
    id: str = "CartPole-v1"
    """what the kind builds: a registered Gymnasium id (``gymnasium``), an EnvPool task id (``envpool``,
    e.g. ``Breakout-v5``), a VMAS scenario name (``vmas``) or a PettingZoo env module (``pettingzoo``)"""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """keyword arguments of the kind's env: of ``gymnasium.make``, ``envpool.make``, ``VmasEnv`` /
    ``TorchCartPole`` (e.g. ``max_episode_steps``, and a VMAS scenario's own arguments such as
    ``n_agents``), or of the PettingZoo env function (e.g. ``N`` of ``simple_spread_v3``)"""
    device: str | None = None
    """where a torch-native env simulates (``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``auto``); None: the
    experiment's ``device``. Gymnasium envs run on the host and take no device"""
    num_training_envs: PositiveInt = 8
    """sub-envs of the training collector (multi-agent envs: envs, each with all its agents)"""
    num_test_envs: PositiveInt = 8
    """sub-envs of the test collector"""
    vector: Literal["sync", "async", "ray"] = "sync"
    """``sync``: in-process; ``async``: one subprocess per sub-env; ``ray``: in Ray actors (the ``ray``
    extra; options in ``ray``; videos are still recorded in-process)"""
    ray: RayEnvConfig | None = None
    """options of ``vector: ray`` (None: the defaults of :class:`RayEnvConfig`)"""
    wrappers: list[WrapperConfig] = Field(default_factory=list)
    """wrappers applied to every sub-env, in order (Gymnasium envs only: the kinds whose ``options`` list
    ``wrappers``, as every kind-only option below)"""
    agent_id: bool = False
    """multi-agent envs (``pettingzoo``, ``vmas`` with ``agent_layout: columns``): add the one-hot agent id
    to every agent's observation (key ``agent_id``), what a network shared by the agents needs"""
    global_state: bool = False
    """multi-agent envs: add the env's global state to every agent's observation (key ``state``), what
    MAPPO's centralised critic reads (``algorithm.network.centralised_critic: true``)"""
    pettingzoo_api: Literal["parallel", "aec"] | None = None
    """``pettingzoo`` only: the env's ``parallel_env()`` (every agent acts each step) or its ``env()``
    (AEC: agents take turns); None: ``aec`` for ``pettingzoo.classic.*`` (board games), else ``parallel``"""
    agent_layout: Literal["joint", "columns"] = "joint"
    """``vmas`` only: ``joint`` (the agents form one joint learner: concatenated observations and
    actions) or ``columns`` (one row per agent and env; what the ``agents`` section and parameter sharing
    need)"""
    groups: Literal["auto"] | dict[str, list[str]] | None = None
    """multi-agent envs: agents with different observation or action spaces in groups (docs/multi_agent.md,
    agent groups): ``auto`` (by name: ``adversary_0`` -> ``adversary``) or ``{group: [agents]}``; train them
    with ``agents.layout: groups``"""

    @model_validator(mode="before")
    @classmethod
    def _kind_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") is not None:
            given = data.get("type")
            if given is not None and given != data["kind"]:
                raise ValueError(
                    f"env.type {given!r} and env.kind {data['kind']!r} differ; kind is an alias of type: "
                    f"give one of them (allowed: {', '.join(ENV_KINDS)})"
                )
            # the resolved env states ``type`` only: the same env compares equal however it was written
            data = {**data, "type": data["kind"], "kind": None}
        return data

    @field_validator("device")
    @classmethod
    def _device_form(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_device_form(value)
        except ConfigurationError:
            raise PydanticCustomError("device", "allowed: {forms}", {"forms": DEVICE_FORMS}) from None

    @model_validator(mode="after")
    def _kind_options(self) -> EnvConfig:
        kind = env_kind(self.type)
        if self.wrappers and "wrappers" not in kind.options:
            raise ValueError(f"env.wrappers apply to Gymnasium envs only, not to type {self.type!r}")
        if self.vector != "sync" and "vector" not in kind.options:
            raise ValueError(f"env.vector applies to Gymnasium envs only, not to type {self.type!r}")
        if self.ray is not None and self.vector != "ray":
            raise ValueError(f"env.ray applies to env.vector: ray only (env.vector is {self.vector!r})")
        if self.vector == "ray" and importlib.util.find_spec("ray") is None:
            raise ValueError("env.vector: ray needs Ray, which is not installed; pip install 'tshtrain[ray]'")
        if self.device is not None and "device" not in kind.options:
            raise ValueError(
                f"env.device applies to torch-native envs (type {kinds_where(takes('device'))}) only"
            )
        return self

    @model_validator(mode="after")
    def _env_counts(self) -> EnvConfig:
        if env_kind(self.type).batched:
            limit, why = MAX_SUB_ENVS_BATCHED, f"type {self.type!r}"
        elif self.vector == "async":
            limit, why = MAX_SUB_ENVS_PER_PROCESS, "vector 'async' (one process per sub-env)"
        else:
            limit, why = MAX_SUB_ENVS_PER_OBJECT, f"type {self.type!r} (one Python env per sub-env)"
        for name in ("num_training_envs", "num_test_envs"):
            value = getattr(self, name)
            if value > limit:
                raise ValueError(
                    f"env.{name} {value}: at most {limit} sub-envs with env.{why}; use fewer sub-envs"
                    + (
                        ""
                        if limit == MAX_SUB_ENVS_BATCHED
                        else f" or a batched simulator ({_batched_kinds()})"
                    )
                )
        return self

    @model_validator(mode="after")
    def _multi_agent_options(self) -> EnvConfig:
        kind = env_kind(self.type)
        layout = f", agent_layout {self.agent_layout!r})" if "agent_layout" in kind.options else ")"
        for name in ("agent_id", "global_state", "groups"):
            if getattr(self, name) and not self.multi_agent:
                value = "true" if name != "groups" else repr(self.groups)
                raise ValueError(
                    f"env.{name}: {value} needs a multi-agent env: {multi_agent_kinds(each='type ')} (got "
                    f"type {self.type!r}{layout}"
                )
        if kind.check_id is not None:
            kind.check_id(self.id)
        if self.pettingzoo_api is not None and "pettingzoo_api" not in kind.options:
            raise ValueError(
                f"env.pettingzoo_api: {self.pettingzoo_api!r} applies to type "
                f"{kinds_where(takes('pettingzoo_api'))} only, not to type {self.type!r}; remove it"
            )
        if self.agent_layout != "joint" and "agent_layout" not in kind.options:
            raise ValueError(
                f"env.agent_layout: {self.agent_layout!r} applies to type "
                f"{kinds_where(takes('agent_layout'))} only, not to type {self.type!r}"
            )
        return self

    @property
    def multi_agent(self) -> bool:
        """Agent columns: the kind's rule (:class:`~tshtrain.config.env_kinds.MultiAgent`); a PettingZoo
        env, or VMAS with ``agent_layout: columns``."""
        return env_kind(self.type).is_multi_agent(self)


class CnnEncoderConfig(Section):
    """The convolutions of the image encoders (``encoder: {type: cnn, ...}``); the defaults are the
    Nature DQN network (images of at least 36x36 pixels)."""

    type: Literal["cnn"]
    """the encoder kind: ``cnn``"""
    channels: list[PositiveInt] = Field(default_factory=lambda: [32, 64, 64])
    """output channels of each convolution"""
    kernel_sizes: list[PositiveInt] = Field(default_factory=lambda: [8, 4, 3])
    """kernel size of each convolution"""
    strides: list[PositiveInt] = Field(default_factory=lambda: [4, 2, 1])
    """stride of each convolution"""
    features: PositiveInt = 512
    """width of the linear layer after the convolutions"""

    @model_validator(mode="after")
    def _one_entry_per_convolution(self) -> CnnEncoderConfig:
        lengths = {len(self.channels), len(self.kernel_sizes), len(self.strides)}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError(
                f"channels {self.channels}, kernel_sizes {self.kernel_sizes} and strides {self.strides} "
                f"need one entry per convolution (the same non-zero length)"
            )
        return self


ENCODER_KINDS = ("auto", "cnn")
"""what ``algorithm.network.encoder`` names"""


def _encoder_value(value: Any) -> Any:
    """Check the kind first, so that a wrong value gets one message naming the allowed ones."""
    if value == "auto" or isinstance(value, CnnEncoderConfig):
        return value
    if isinstance(value, dict) and value.get("type") == "cnn":
        try:
            return CnnEncoderConfig.model_validate(value)
        except ValidationError as error:  # one message per problem, without pydantic's union noise
            allowed = ", ".join(CnnEncoderConfig.model_fields)
            problems = "; ".join(
                f"{'.'.join(str(p) for p in item['loc']) or 'cnn'}: {item['msg']}" for item in error.errors()
            )
            raise ValueError(f"{problems} (keys of a cnn encoder: {allowed})") from None
    if isinstance(value, dict) and value.get("type") == "auto" and len(value) == 1:
        return "auto"
    raise ValueError(
        f"expected 'auto' (an encoder chosen from the observation space) or {{type: cnn, channels: [...], "
        f"kernel_sizes: [...], strides: [...], features: N}}; encoder kinds: {', '.join(ENCODER_KINDS)}"
    )


EncoderConfig = Annotated[Literal["auto"] | CnnEncoderConfig, BeforeValidator(_encoder_value)]
"""``"auto"`` or a :class:`CnnEncoderConfig`"""


class MlpNetwork(Section):
    """MLP sizes of algorithms with one network (REINFORCE, BC)."""

    hidden_sizes: list[PositiveInt] = Field(default_factory=lambda: [64, 64])
    """hidden layer widths"""
    activation: Activation = "tanh"
    """activation after each hidden layer"""
    encoder: EncoderConfig = "auto"
    """how observations become the MLP's input. ``auto``: flat Box observations go to the MLP as they
    are; image Boxes (uint8, three axes) get a CNN (Nature DQN convolutions for images of at least
    36x36 pixels, three 2x2 convolutions for smaller ones), Discrete ones a one-hot vector, MultiBinary /
    MultiDiscrete ones their values as floats, and a Dict one encoder per key, concatenated.
    ``{type: cnn, ...}``: as ``auto``, with these convolutions for the images (ppo, a2c, npg, trpo,
    reinforce, dqn, discrete_cql and bc)"""


class ActorCriticNetwork(MlpNetwork):
    """Networks of A2C and PPO."""

    critic_hidden_sizes: list[PositiveInt] | None = None
    """hidden widths of the critic; None: the actor's"""
    normalize_obs: bool = False
    """a running observation normaliser as the first layer of actor and critic"""
    init_log_std: float = 0.0
    """initial log standard deviation of the Gaussian policy (Box actions only)"""
    centralised_critic: bool = False
    """MAPPO: the critic reads the env's global state (observation key ``state``, with ``agent_id`` when
    present) and the actor the agent's own observation (``obs``, ``agent_id``); needs a multi-agent env
    with ``env.global_state: true``. False: actor and critic read the whole observation"""
    critic_per_world: bool = False
    """with ``centralised_critic``: one critic call per world on ``state`` alone, with one output per
    agent (:class:`~tshtrain.algorithm.blocks.world_critic.PerWorldCritic`; mini-batches hold whole
    world steps, so ``batch_size`` must be a multiple of the number of agents). False: one call per
    agent on ``state`` + ``agent_id``"""


class QNetwork(MlpNetwork):
    """The Q network of DQN and discrete CQL."""

    activation: Activation = "relu"
    dueling: bool = False
    """a dueling head (value + advantage) on the trunk of hidden_sizes"""


class DistributionalQNetwork(MlpNetwork):
    """The ReLU MLP trunk of the distributional Q networks of C51, QR-DQN, IQN and Rainbow (flat Box
    observations, ``encoder: auto``)."""

    hidden_sizes: list[PositiveInt] = Field(default_factory=lambda: [128, 128, 128, 128])
    """hidden layer widths of the trunk"""
    activation: Literal["relu"] = "relu"
    """activation after each hidden layer (the distributional networks are ReLU MLPs)"""


class CategoricalQNetwork(DistributionalQNetwork):
    """The categorical return distribution of C51 (``categorical_mlp``)."""

    num_atoms: int = Field(default=51, ge=2)
    """atoms of the fixed support"""
    v_min: float = Field(default=-10.0, allow_inf_nan=False)
    """lowest atom of the support"""
    v_max: float = Field(default=10.0, allow_inf_nan=False)
    """highest atom of the support (> v_min)"""
    dueling: bool = False
    """a value head next to the advantage head"""

    @model_validator(mode="after")
    def _support(self) -> CategoricalQNetwork:
        if self.v_max <= self.v_min:
            raise ValueError(f"v_max must be > v_min, got v_min={self.v_min} and v_max={self.v_max}")
        return self


class RainbowQNetwork(CategoricalQNetwork):
    """The noisy dueling categorical network of Rainbow (``categorical_mlp(..., noisy_sigma0=...)``)."""

    dueling: bool = True
    """a value head next to the advantage head"""
    noisy_sigma0: float = Field(default=NOISY_SIGMA0, gt=0.0, allow_inf_nan=False)
    """initial noise scale of the NoisyLinear head layers (default: ``NOISY_SIGMA0``, 0.1, Tianshou's
    Rainbow test; the paper's 0.5 is a setting away)"""


class QuantileQNetwork(DistributionalQNetwork):
    """The fixed-fraction quantiles of QR-DQN (``quantile_mlp``)."""

    num_quantiles: int = Field(default=200, ge=2)
    """quantiles of the return per action"""


class ImplicitQuantileQNetwork(DistributionalQNetwork):
    """The implicit quantile network of IQN (``iqn_mlp``)."""

    num_cosines: PositiveInt = 64
    """size of the cosine embedding of the fractions"""
    num_policy_quantiles: PositiveInt = 32
    """fractions averaged when acting"""
    num_online_taus: PositiveInt = 8
    """fractions sampled for the online network per gradient step (``IQNSampling``)"""
    num_target_taus: PositiveInt = 8
    """fractions sampled for the target network per gradient step (``IQNSampling``)"""


class ActorCriticsNetwork(MlpNetwork):
    """Actor and Q critics of DDPG, TD3, SAC, discrete SAC, CQL and TD3+BC."""

    activation: Activation = "relu"
    critic_hidden_sizes: list[PositiveInt] | None = None
    """hidden widths of each critic; None: the actor's"""
    num_critics: PositiveInt = 2
    """critics in the ensemble (the algorithms take the minimum of two)"""


class TD3BCNetwork(ActorCriticsNetwork):
    """Actor and Q critics of TD3+BC."""

    normalize_obs: bool = True
    """a running observation normaliser as the first layer of actor and critics, fitted to the dataset
    (the paper's state normalisation)"""


class TrustRegionNetwork(ActorCriticNetwork):
    """Actor and critic of NPG and TRPO (Tianshou's NPG / TRPO tests: 64-64 tanh MLPs). The critic must
    not share parameters with the actor: ``critic_per_world`` is refused."""

    orthogonal_init: bool = True
    """initialise every linear layer of actor and critic orthogonally (gain 1, zero bias), as Tianshou's
    NPG / TRPO tests and tests/learning/test_learning_npg_trpo.py do; False: torch's default"""


class REDQNetwork(ActorCriticsNetwork):
    """Actor and critic ensemble of REDQ (one batched network of ``num_critics`` Q critics)."""

    num_critics: PositiveInt = 10
    """N, the critics in the ensemble (the paper and Tianshou: 10); at least ``params.subset_size``"""


class IQLNetwork(ActorCriticsNetwork):
    """Actor, twin Q critics and state-value network of IQL."""

    value_hidden_sizes: list[PositiveInt] | None = None
    """hidden widths of the state-value network V(s); None: the critics'"""


class BCQNetwork(ActorCriticsNetwork):
    """The perturbation network, twin critics and conditional VAE of BCQ (defaults: Tianshou's
    Pendulum test)."""

    hidden_sizes: list[PositiveInt] = Field(default_factory=lambda: [64])
    """hidden widths of the perturbation network (and of the critics unless critic_hidden_sizes)"""
    num_critics: Literal[2] = 2
    """BCQ's twin critics (fixed)"""
    vae_hidden_sizes: list[PositiveInt] = Field(default_factory=lambda: [32, 32], min_length=1)
    """hidden widths of the VAE's encoder and of its decoder"""
    latent_dim: PositiveInt | None = None
    """size of the VAE's latent z; None: twice the action size"""
    phi: float = Field(default=0.05, ge=0.0, le=2.0, allow_inf_nan=False)
    """largest change the perturbation makes per action dimension (in the [-1, 1] action scale)"""
    num_forward_sampled_actions: PositiveInt = 100
    """VAE actions per observation when acting; the one with the largest Q is taken"""


class DiscreteCRRNetwork(MlpNetwork):
    """Actor (logits) and critic (Q values of every action) of discrete CRR, two separate MLPs."""

    activation: Activation = "relu"
    critic_hidden_sizes: list[PositiveInt] | None = None
    """hidden widths of the critic; None: the actor's"""


class TeamQNetwork(MlpNetwork):
    """The agents' Q-network of VDN: one MLP shared by every agent, on its ``obs`` and (when the env
    adds it, ``env.agent_id: true``) ``agent_id``."""

    activation: Activation = "relu"


class QMixNetwork(TeamQNetwork):
    """QMIX: the agents' Q-network and the mixing network over the global state (``env.global_state:
    true``)."""

    mixer_embed_dim: PositiveInt = 32
    """width of the mixing layer"""
    mixer_hypernet_hidden_dim: PositiveInt | None = 64
    """a hidden ReLU layer of this width in the hypernetworks of the mixing weights; None: linear"""


class NoExploration(Section):
    """The algorithm explores by itself (a stochastic policy) or not at all (offline)."""


class EpsilonGreedy(Section):
    """Epsilon-greedy exploration of a Q-value policy, linear decay over training env steps."""

    eps_start: float = Field(default=1.0, ge=0.0, le=1.0)
    eps_end: float = Field(default=0.05, ge=0.0, le=1.0)
    eps_decay_env_steps: PositiveInt = 10_000


class GaussianNoise(Section):
    """Gaussian noise added to a deterministic actor's action in training (in the [-1, 1] scale)."""

    noise_std: float = Field(default=0.1, ge=0.0)


class AlgorithmConfig(Section):
    """Which algorithm, its hyperparameters and its networks."""

    name: str
    """the algorithm (``tshtrain list`` shows them)"""
    params: dict[str, Any] = Field(default_factory=dict)
    """fields of the algorithm's params class (e.g. PPOParams); schedules as ``"linear"`` or ``"constant"``"""
    network: dict[str, Any] = Field(default_factory=dict)
    """network sizes (see ``tshtrain config ALGO``)"""
    exploration: dict[str, Any] = Field(default_factory=dict)
    """exploration settings of the training policy, where the algorithm has any"""


class BufferConfig(Section):
    """The training replay buffer of off-policy algorithms (on-policy ones hold one collection step)."""

    size: PositiveInt = 20_000
    """transitions kept in total (over all sub-buffers)"""
    prioritized: bool = False
    """prioritized replay (DQN family)"""
    alpha: float = Field(default=0.6, ge=0.0)
    """priority exponent (prioritized only)"""
    beta: float = Field(default=0.4, ge=0.0)
    """importance-weight exponent (prioritized only)"""
    prefill_env_steps: NonNegativeInt = 0
    """uniformly random env steps collected before training (not counted by the trainer)"""
    save_on_exit: bool = False
    """save the training buffer to OUTPUT_DIR/buffer at the end (a dataset for offline algorithms)"""


class DatasetConfig(Section):
    """The dataset of an offline algorithm: a saved buffer or a local Minari dataset."""

    path: str | None = None
    """a buffer directory written by ``tshtrain.data.save_buffer`` (or ``buffer.save_on_exit``)"""
    minari_id: str | None = None
    """a Minari dataset id in the local Minari directory (nothing is downloaded)"""

    @model_validator(mode="after")
    def _one_source(self) -> DatasetConfig:
        if (self.path is None) == (self.minari_id is None):
            raise ValueError("give exactly one of path and minari_id")
        return self


class TensorboardConfig(Section):
    kind: Literal["tensorboard"] = "tensorboard"


class CsvConfig(Section):
    kind: Literal["csv"] = "csv"


class WandbConfig(Section):
    kind: Literal["wandb"] = "wandb"
    project: str = "tshtrain"
    group: str | None = None
    tags: list[str] = Field(default_factory=list)
    mode: Literal["online", "offline", "disabled"] = "offline"
    """``offline`` by default: nothing leaves the machine until ``wandb sync``"""


class MlflowConfig(Section):
    kind: Literal["mlflow"] = "mlflow"
    tracking_uri: str | None = None
    """None: the project's store, the SQLite database ``mlflow.db`` next to the run directory
    (``runs/mlflow.db`` for runs under ``runs/``), shared by every run written there; else any URI
    MLflow accepts (``http://host:5000``, ``sqlite:///path.db``, ``file:///path/mlruns``)"""
    experiment_name: str = "tshtrain"


LoggerConfig = Annotated[
    TensorboardConfig | CsvConfig | WandbConfig | MlflowConfig, Field(discriminator="kind")
]
"""one writer of the run's logs, chosen by ``kind``"""


def _default_loggers() -> list[LoggerConfig]:
    return [TensorboardConfig()]


class CheckpointConfig(Section):
    """Automatic checkpoints under OUTPUT_DIR/checkpoints (see docs/checkpoints.md)."""

    enabled: bool = True
    every_num_epochs: PositiveInt | None = 1
    every_num_env_steps: PositiveInt | None = None
    keep_last: PositiveInt = 3
    save_best: bool = True
    include_buffers: bool = True


AGENT_LAYOUTS = ("independent", "shared", "scopes")
"""what ``agents.layout`` names"""
RETURN_REDUCTIONS = ("mean", "sum", "min", "max", "agent:NAME")
"""what ``agents.return_reduction`` names"""


class MemberConfig(Section):
    """One agent's (or scope's) learner in the ``agents`` section: its own algorithm, or a fixed policy."""

    algorithm: dict[str, Any] | None = None
    """the agent's algorithm, laid over the top-level ``algorithm`` section when ``name`` is the same or
    left out, else over the named algorithm's default one (``tshtrain config NAME``); its trainer family
    must be the top-level algorithm's"""
    policy: Literal["random", "frozen"] | None = None
    """a fixed policy that is never trained: ``random`` (uniform among the legal actions) or ``frozen``
    (the policy of ``learner`` in the tshtrain checkpoint ``checkpoint``)"""
    checkpoint: str | None = None
    """frozen only: a checkpoint directory written by ``tshtrain train`` (e.g. RUN/checkpoints/best) or a
    run directory (then best/, else final/, else the newest periodic checkpoint). Only weights are read
    (``torch.load(weights_only=True)``), after the checkpoint's files are verified; the network is built
    as that run's config.yaml describes it"""
    learner: str | None = None
    """frozen only: the learner of that run whose policy is loaded (an agent name, ``shared``, or
    ``agent_K`` for scopes); None: the agent's own name. Leave it out for a single-agent run"""

    @model_validator(mode="after")
    def _one_kind(self) -> MemberConfig:
        if (self.algorithm is None) == (self.policy is None):
            raise ValueError(
                "give exactly one of algorithm (a trained learner: {name: ..., params: ...}) and policy "
                "(random | frozen)"
            )
        if self.policy == "frozen" and self.checkpoint is None:
            raise ValueError("policy: frozen needs checkpoint: PATH (a tshtrain checkpoint or run directory)")
        if self.policy != "frozen" and (self.checkpoint is not None or self.learner is not None):
            raise ValueError(
                f"checkpoint and learner apply to policy: frozen only (this member has "
                f"{'policy: ' + str(self.policy) if self.policy else 'an algorithm'})"
            )
        return self


class AgentsConfig(Section):
    """Several learners in one run (see docs/multi_agent.md): who learns which agents' columns."""

    layout: Literal["independent", "shared", "scopes", "groups"] = "independent"
    """``independent``: one learner per agent of a multi-agent env (``members`` by agent name);
    ``shared``: one learner for every agent (parameter sharing; add ``env.agent_id: true`` so the network
    tells the agents apart); ``scopes``: learners over slices of a single-agent Gymnasium env's sub-envs
    (``agents_scope``; members ``agent_0``, ``agent_1``, ...); ``groups``: agents with different spaces
    in the groups of ``env.groups``, one learner per group (``members`` by group name)"""
    share_within_groups: bool = True
    """groups only: one learner per group, shared by its agents (True), or one per agent of each group
    (False; ``members`` by agent name)"""
    update_mode: Literal["sequential", "parallel", "stacked"] = "sequential"
    """``sequential``: the learners update one after another; ``parallel``: each in its own process;
    ``stacked``: independent learners of one algorithm (PPO, DQN, SAC) in one pass over their stacked
    networks (the same learning as sequential to float rounding)"""
    agents_scope: list[PositiveInt] | None = None
    """scopes only: the sub-envs of each learner, in order; they sum to ``env.num_training_envs``"""
    members: dict[str, MemberConfig] = Field(default_factory=dict)
    """per-learner settings by agent name (scopes: ``agent_K``); an agent without an entry learns with the
    top-level ``algorithm``"""
    return_reduction: str = "mean"
    """how per-agent episode returns become the one test score (best checkpoint, ``stop_score``):
    ``mean``, ``sum``, ``min``, ``max`` over the agents, or ``agent:NAME`` (that agent's return)"""

    @field_validator("return_reduction")
    @classmethod
    def _reduction(cls, value: str) -> str:
        if value in ("mean", "sum", "min", "max") or (value.startswith("agent:") and len(value) > 6):
            return value
        raise PydanticCustomError(
            "return_reduction", "allowed: {allowed}", {"allowed": ", ".join(RETURN_REDUCTIONS)}
        )

    @model_validator(mode="after")
    def _layout_fields(self) -> AgentsConfig:
        if self.layout == "scopes":
            if not self.agents_scope:
                raise ValueError(
                    "layout scopes needs agents_scope: [N, ...] (the sub-envs of each learner, summing to "
                    "env.num_training_envs)"
                )
            names = [f"agent_{k}" for k in range(len(self.agents_scope))]
            unknown = [name for name in self.members if name not in names]
            if unknown:
                raise ValueError(
                    f"members {unknown}: unknown; the scopes' learners are {names} (one per entry of "
                    f"agents_scope {self.agents_scope})"
                )
            if self.return_reduction != "mean":
                raise ValueError(
                    f"return_reduction {self.return_reduction!r}: scopes run a single-agent env, whose "
                    f"episodes have one return each; leave return_reduction out (mean)"
                )
        elif self.agents_scope is not None:
            raise ValueError(
                f"agents_scope applies to layout scopes only, not to layout {self.layout!r}; remove it"
            )
        if not self.share_within_groups and self.layout != "groups":
            raise ValueError(
                f"share_within_groups applies to layout groups only, not to layout {self.layout!r}; remove it"
            )
        if self.layout == "shared" and self.members:
            raise ValueError(
                f"members {sorted(self.members)}: layout shared has one learner for every agent, configured "
                f"by the top-level algorithm section; remove members (or use layout independent)"
            )
        return self


class Experiment(Section):
    """A whole experiment: what ``tshtrain train`` runs and writes back as OUTPUT_DIR/config.yaml."""

    seed: int = Field(default=0, ge=0, lt=MAX_SEED)
    """seeds networks (torch), policies, buffers and envs (training envs seed, seed+1, ...; test envs
    seed+1000, ...); in [0, 2**63)"""
    torch_threads: PositiveInt | None = 1
    """``torch.set_num_threads``; None leaves torch's default"""
    device: str = DEFAULT_DEVICE
    """where the networks live and update: ``auto`` (CUDA when available, else CPU), ``cpu``, ``cuda``,
    ``cuda:N`` or ``mps``; checked against the machine when the run is built"""
    output_dir: str | None = None
    """where the run writes; None: runs/<algorithm>-<env>-<date>-<time>"""
    env: EnvConfig = Field(default_factory=EnvConfig)
    algorithm: AlgorithmConfig
    trainer: dict[str, Any] = Field(default_factory=dict)
    """value fields of the trainer params class of the algorithm's family, plus ``stop_score``"""
    buffer: BufferConfig = Field(default_factory=BufferConfig)
    dataset: DatasetConfig | None = None
    loggers: list[LoggerConfig] = Field(default_factory=_default_loggers)
    log_intervals: dict[str, Any] = Field(default_factory=dict)
    """how often each scope is logged: the fields of ``tshtrain.logger.LogIntervals``
    (``training_interval``, ``test_interval``, ``update_interval``, ``info_interval``); a key left out
    or null takes the default of the algorithm's trainer family (resolved into numbers)"""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    agents: AgentsConfig | None = None
    """several learners in one run (multi-agent envs, or agent scopes); None: one learner"""

    @field_validator("device")
    @classmethod
    def _device_form(cls, value: str) -> str:
        try:
            return check_device_form(value)
        except ConfigurationError:
            raise PydanticCustomError("device", "allowed: {forms}", {"forms": DEVICE_FORMS}) from None

    @model_validator(mode="after")
    def _agents_fit_env(self) -> Experiment:
        env, agents = self.env, self.agents
        kind = env_kind(env.type)
        if kind.interface is EnvInterface.MULTI_AGENT and agents is None:
            raise ValueError(
                f"env.type {env.type}: a multi-agent env needs an agents section, e.g. agents: {{layout: "
                "independent} (one learner per agent) or {layout: shared} (parameter sharing)"
            )
        grouped = env.groups is not None
        if grouped != (agents is not None and agents.layout == "groups"):
            raise ValueError(
                f"env.groups: {env.groups!r} goes with agents.layout: groups (one learner per agent group), "
                f"got agents.layout: {agents.layout if agents is not None else None!r}"
                if grouped
                else "agents.layout: groups needs env.groups: auto (or {group: [agents]}), the env's agent "
                "groups"
            )
        if agents is None:
            return self
        if agents.layout == "scopes":
            if env.multi_agent or kind.interface is not EnvInterface.GYMNASIUM:
                raise ValueError(
                    f"agents.layout: scopes slices a single-agent Gymnasium env's sub-envs; env.type is "
                    f"{env.type!r}" + (" with agent columns" if env.multi_agent else "")
                )
            assert agents.agents_scope is not None
            total = sum(agents.agents_scope)
            if total != env.num_training_envs:
                raise ValueError(
                    f"agents.agents_scope {agents.agents_scope} sums to {total}, but env.num_training_envs "
                    f"is {env.num_training_envs}; they must be equal (every training sub-env has one learner)"
                )
            if env.num_test_envs % total:
                raise ValueError(
                    f"env.num_test_envs {env.num_test_envs}: with agents_scope {agents.agents_scope} the "
                    f"test envs are split like the training envs, so it must be a multiple of {total}"
                )
        elif not env.multi_agent:
            raise ValueError(
                f"agents.layout: {agents.layout!r} needs a multi-agent env (env.type "
                f"{multi_agent_kinds(layout_key='env.agent_layout')}), got env.type {env.type!r}"
                + (f" with agent_layout {env.agent_layout!r}" if "agent_layout" in kind.options else "")
                + "; agent scopes over a single-agent env are layout: scopes"
            )
        return self


NETWORK_MODELS: tuple[type[MlpNetwork], ...] = (MlpNetwork, ActorCriticNetwork, QNetwork, ActorCriticsNetwork)
EXPLORATION_MODELS: tuple[type[Section], ...] = (NoExploration, EpsilonGreedy, GaussianNoise)
