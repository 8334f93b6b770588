"""The publications the course rests on, and which of the course's claims each one supports (per chapter).

Only what is sure is cited: authors, title, year, venue and arXiv id where there is one. The guide prints them;
nothing here is fetched.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    key: str  # short name used by the chapters below, e.g. "gqa"
    authors: str
    title: str
    year: int
    venue: str
    arxiv: str = ""

    def citation(self) -> str:
        arxiv = f" arXiv:{self.arxiv}." if self.arxiv else ""
        return f"{self.authors} ({self.year}). *{self.title}*. {self.venue}.{arxiv}"


REFERENCES = {r.key: r for r in (
    Reference("transformer", "Vaswani, A., Shazeer, N., Parmar, N., et al.", "Attention Is All You Need", 2017,
              "NeurIPS 2017", "1706.03762"),
    Reference("gpt2", "Radford, A., Wu, J., Child, R., Luan, D., Amodei, D., Sutskever, I.",
              "Language Models are Unsupervised Multitask Learners", 2019, "OpenAI technical report"),
    Reference("mqa", "Shazeer, N.", "Fast Transformer Decoding: One Write-Head is All You Need", 2019, "arXiv preprint",
              "1911.02150"),
    Reference("gqa", "Ainslie, J., Lee-Thorp, J., de Jong, M., Zemlyanskiy, Y., Lebrón, F., Sanghai, S.",
              "GQA: Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints", 2023,
              "EMNLP 2023", "2305.13245"),
    Reference("rope", "Su, J., Lu, Y., Pan, S., Murtadha, A., Wen, B., Liu, Y.",
              "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021, "arXiv preprint", "2104.09864"),
    Reference("rmsnorm", "Zhang, B., Sennrich, R.", "Root Mean Square Layer Normalization", 2019, "NeurIPS 2019",
              "1910.07467"),
    Reference("swiglu", "Shazeer, N.", "GLU Variants Improve Transformer", 2020, "arXiv preprint", "2002.05202"),
    Reference("llama", "Touvron, H., Lavril, T., Izacard, G., et al.",
              "LLaMA: Open and Efficient Foundation Language Models", 2023, "arXiv preprint", "2302.13971"),
    Reference("llama2", "Touvron, H., Martin, L., Stone, K., et al.",
              "Llama 2: Open Foundation and Fine-Tuned Chat Models", 2023, "arXiv preprint", "2307.09288"),
    Reference("llama3", "Dubey, A., et al. (Llama Team, AI @ Meta)", "The Llama 3 Herd of Models", 2024,
              "arXiv preprint", "2407.21783"),
    Reference("mistral", "Jiang, A. Q., Sablayrolles, A., Mensch, A., et al.", "Mistral 7B", 2023, "arXiv preprint",
              "2310.06825"),
    Reference("gemma2", "Gemma Team, Google DeepMind", "Gemma 2: Improving Open Language Models at a Practical Size",
              2024, "arXiv preprint", "2408.00118"),
    Reference("deepseekv2", "DeepSeek-AI",
              "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language Model", 2024,
              "arXiv preprint", "2405.04434"),
    Reference("deepseekv3", "DeepSeek-AI", "DeepSeek-V3 Technical Report", 2024, "arXiv preprint", "2412.19437"),
    Reference("roofline", "Williams, S., Waterman, A., Patterson, D.",
              "Roofline: An Insightful Visual Performance Model for Multicore Architectures", 2009,
              "Communications of the ACM 52(4)"),
    Reference("pope", "Pope, R., Douglas, S., Chowdhery, A., et al.", "Efficiently Scaling Transformer Inference", 2023,
              "MLSys 2023", "2211.05102"),
    Reference("flashattention", "Dao, T., Fu, D. Y., Ermon, S., Rudra, A., Ré, C.",
              "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", 2022, "NeurIPS 2022",
              "2205.14135"),
    Reference("kivi", "Liu, Z., Yuan, J., Jin, H., et al.",
              "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache", 2024, "ICML 2024", "2402.02750"),
    Reference("vllm", "Kwon, W., Li, Z., Zhuang, S., Sheng, Y., Zheng, L., Yu, C. H., Gonzalez, J. E., Zhang, H., "
              "Stoica, I.", "Efficient Memory Management for Large Language Model Serving with PagedAttention", 2023,
              "SOSP 2023", "2309.06180"),
    Reference("orca", "Yu, G.-I., Jeong, J. S., Kim, G.-W., Kim, S., Chun, B.-G.",
              "Orca: A Distributed Serving System for Transformer-Based Generative Models", 2022, "OSDI 2022"),
    Reference("sarathi", "Agrawal, A., Panwar, A., Mohan, J., et al.",
              "SARATHI: Efficient LLM Inference by Piggybacking Decodes with Chunked Prefills", 2023, "arXiv preprint",
              "2308.16369"),
    Reference("streamingllm", "Xiao, G., Tian, Y., Chen, B., Han, S., Lewis, M.",
              "Efficient Streaming Language Models with Attention Sinks", 2024, "ICLR 2024", "2309.17453"),
    Reference("hf", "Wolf, T., Debut, L., Sanh, V., et al.",
              "Transformers: State-of-the-Art Natural Language Processing", 2020, "EMNLP 2020 (System Demonstrations)",
              "1910.03771"),
)}


@dataclass(frozen=True)
class Support:
    """One reference and the claim of a chapter it supports (Chinese)."""

    key: str
    claim: str

    @property
    def reference(self) -> Reference:
        return REFERENCES[self.key]
