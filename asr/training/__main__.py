"""python -m asr.training experiment=NAME [overrides]: compose the config from conf/ and train."""
import hydra
from omegaconf import DictConfig

from asr.training.train import train


@hydra.main(config_path="../../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    train(cfg)


main()
