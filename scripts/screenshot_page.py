"""A screenshot of the page `python -m asr.serve` serves, after a fake microphone has spoken: docs/page.png.

    python scripts/screenshot_page.py [--out docs/page.png]

Debian's headless Chromium (`chromium`, `chromium-driver`; scripts/setup.sh installs them) opens the page with a
fake microphone that plays the shipped examples (flite's, speechocean762's, flite's again), a pause between
them, and the shot is taken while the third is being heard: two finals (their words dimmed where the model is
unsure) above the third's partial, the connection state beside the buttons. tests/test_serve_browser.py drives
the page the same way (`chromium`, `microphone_wav`).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench.server_process import ServerUnderTest  # noqa: E402

from asr.audio.resample import StreamingResampler  # noqa: E402

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
EXAMPLES = ROOT / "asr" / "examples"
WIDTH, HEIGHT = 820, 570  # the page's viewport and the shot, in CSS pixels


def chromium(wav: Path | None, profile: Path, size: tuple[int, int] | None = None):
    """Headless Chromium whose fake microphone plays `wav` once (no file: a beep); its DevTools log keeps the
    network events (the WebSocket frames). `size`: the window's (width, height)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 "--autoplay-policy=no-user-gesture-required", "--hide-scrollbars",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    if size is not None:
        options.add_argument(f"--window-size={size[0]},{size[1]}")
    if wav is not None:
        options.add_argument(f"--use-file-for-fake-audio-capture={wav}%noloop")
    return webdriver.Chrome(options=options, service=Service(str(DRIVER)))


def context_rate(profile: Path) -> int:
    """The sample rate of a new AudioContext in this Chromium (its audio output's rate)."""
    browser = chromium(None, profile)
    try:
        return int(browser.execute_script("return new AudioContext().sampleRate"))
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


def microphone_wav(sources: list[Path], rate: int, folder: Path, pause: float = 1.5) -> tuple[Path, Path]:
    """`sources` one after another as int16 WAV at `rate` (the page's AudioContext rate, so Chromium resamples
    nothing), each from its first non-zero sample, `pause` seconds of silence before, between and after them:
    (what the fake microphone plays, what the page should send: the same without the leading silence, which the
    page skips)."""
    silence, parts = np.zeros(round(rate * pause), np.int16), []
    for source in sources:
        wave, original = sf.read(source, dtype="float32")
        resampler = StreamingResampler(original, rate)
        pcm = np.round(np.concatenate([resampler.push(wave), resampler.flush()]) * 32768).clip(-32768, 32767)
        parts += [pcm[np.flatnonzero(pcm)[0]:].astype(np.int16), silence]
    played, sent = folder / "microphone.wav", folder / "sent.wav"
    sf.write(played, np.concatenate([silence, *parts]), rate, subtype="PCM_16")
    sf.write(sent, np.concatenate(parts), rate, subtype="PCM_16")
    return played, sent


def screenshot(out: Path, timeout: float = 60.0) -> None:
    """Serve the page, let the fake microphone speak, and save the shot to `out` (PNG)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    work = Path(tempfile.mkdtemp(prefix="asr-page-"))
    server, browser = ServerUnderTest(["--workers", "1"]), None
    try:
        speech, slt = EXAMPLES / "speechocean762_0813_0233.flac", EXAMPLES / "synthetic_slt.flac"
        played, _ = microphone_wav([slt, speech, slt], context_rate(work / "probe"), work)
        browser = chromium(played, work / "profile", (WIDTH, HEIGHT))
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the shot is the page, WIDTH x HEIGHT
                                {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        browser.get(f"http://127.0.0.1:{server.port}/")
        browser.find_element(By.ID, "start").click()

        def on_screen(b) -> bool:  # two finals, and the third segment's partial words
            return (len(b.find_elements(By.CSS_SELECTOR, "#finals p")) >= 2
                    and len(b.find_element(By.ID, "partial").text.split()) >= 3)
        WebDriverWait(browser, timeout, poll_frequency=0.05).until(on_screen)
        time.sleep(0.1)  # the frame that shows them painted
        out.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(out))
    finally:
        if browser is not None:
            browser.quit()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "page.png", help="the PNG to write")
    args = parser.parse_args(argv)
    if not (CHROMIUM.exists() and DRIVER.exists()):
        print(f"screenshot_page: needs {CHROMIUM} and {DRIVER} (apt-get install chromium chromium-driver)",
              file=sys.stderr)
        return 1
    screenshot(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
