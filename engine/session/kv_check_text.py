"""The text the built-in KV check reads (engine/session/kv_quality.py): the opening of
benchmarks/data/kv_quality_prose.txt, English prose written for this repository and dedicated
to the public domain. Long enough that the last tokens attend to a few hundred earlier ones,
short enough that the check takes seconds on a CPU."""

KV_CHECK_TEXT = "\n\n".join(
    (
        ("The Keeper of the Northern Light"),
        (
            "For forty-one years the lighthouse on Carrow Point was kept by one family, and"
            " for the last nineteen of those years it was kept by a woman named Agnes "
            "Tullo, who had been born in the cottage at its foot and who expected, with the"
            " calm certainty of people who have never lived anywhere else, to die there as "
            "well. The point itself was a long finger of dark rock that ran out from the "
            "moor into the grey water of the firth, and at its end the tower rose sixty "
            "feet above the high-tide line, white and slightly crooked, like a candle that "
            "had been set down in a hurry. Ships coming down from the north passed within "
            "two miles of it, and on a clear night the lamp could be seen from the fishing "
            "villages on the far shore, blinking twice every fifteen seconds, steady as a "
            "pulse."
        ),
        (
            "People who have not lived beside a lighthouse tend to imagine that the work is"
            " lonely and romantic, a matter of long evenings spent gazing at the sea. Agnes"
            " would have laughed at that. The work was mostly cleaning. The great lens, "
            "built in Paris in the year her grandfather was born, had to be polished every "
            "morning with soft cloths and spirits of wine, because a single smear of soot "
            "or salt could scatter the beam and cost a mile of range. The brass had to be "
            "rubbed until it shone. The clockwork that turned the lens had to be wound "
            "every few hours through the night, a heavy weight hauled up the centre of the "
            "tower by a crank that squealed unless it was oiled. The oil itself, and later "
            "the paraffin, had to be carried up one hundred and twelve stone steps in cans,"
            " and the wicks had to be trimmed so that they burned with a clean white flame "
            "rather than a smoky yellow one. Every entry went into the log: the time the "
            "light was lit, the state of the weather, the ships that passed, the hour the "
            "light was put out at dawn. Her father had kept the log in a careful, sloping "
            "hand, and she kept it in the same hand, because she had learned to write by "
            "copying his entries."
        ),
        (
            "There were storms, of course. In the winter of the great gale the sea broke "
            "over the whole point, and the spray reached the gallery around the lantern, "
            "sixty feet up, and froze there in long ribbons of ice. Agnes spent that night "
            "on the gallery with a bucket of hot water and a wooden mallet, knocking the "
            "ice from the glass so that the light would not be smothered. She could not see"
            " the ships she was keeping the light for. She could hear nothing but the wind,"
            " which was so loud that it stopped being a sound and became a kind of pressure"
            " on the body, like deep water."
        ),
    )
)
