"""python -m asr.training.restorer [restorer=small|toy] [overrides]: compose conf/train_restorer.yaml and train the
casing and punctuation restorer (asr/training/restorer/train.py)."""
import hydra
from omegaconf import DictConfig, OmegaConf

from asr.training.restorer.train import train_restorer


@hydra.main(config_path="../../../conf", config_name="train_restorer", version_base="1.3")
def main(cfg: DictConfig) -> None:
    train_restorer(OmegaConf.to_object(cfg))


main()
