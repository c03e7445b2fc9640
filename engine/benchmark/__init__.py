"""`hearth bench`: Hearth's generation path measured beside llama.cpp's own llama-bench."""
